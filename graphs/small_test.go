package graphs

import "testing"

// TestMNISTFastMatchesTorchStructure: mnist_fast against the same nn.Sequential built in PyTorch 1.13
// (Conv2d(1,16,3,2,1,bias=False), BatchNorm2d, ReLU, Conv2d(16,32,3,2,1,bias=False), BatchNorm2d, ReLU,
// Conv2d(32,64,3,1,1,bias=False), BatchNorm2d, ReLU; Linear(3136,10) on the NCHW flatten), counted as
// resnet_test.go describes.
func TestMNISTFastMatchesTorchStructure(t *testing.T) {
	checkNetAgainstRef(t, "mnist_fast", netRef{params: 54778, noDecay: 234, macs: 1188544,
		fingerprint: "2a0d535745b17e48", keys: 17, classes: 10})
}

func TestMNISTFastTrains(t *testing.T) {
	checkTrains(t, "mnist_fast", Options{NumClasses: 10, Seed: 1}, 8, 28, 0.1, 0.5)
}
