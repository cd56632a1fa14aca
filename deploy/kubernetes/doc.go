// Package kubernetes holds mcpd's Kubernetes manifests: sidecar/ runs mcpd
// as a native sidecar beside an agent, shared/ runs it as a Deployment and
// Service that agents in other pods share. Its test decodes every manifest
// strictly into the Kubernetes API types and runs mcpd with the manifests'
// flags, files and probes. docs/deployment.md explains both layouts.
package kubernetes
