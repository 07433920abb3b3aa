//go:build tools

// Package tools pins the server's main package in this module, so that
// `go mod tidy` keeps every module it needs in go.mod and go.sum.
package tools

import _ "github.com/grafana/pyroscope/cmd/pyroscope"
