module github.com/streambridge/streambridge

go 1.26.8

require (
	github.com/ebitengine/purego v0.11.3 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
)
