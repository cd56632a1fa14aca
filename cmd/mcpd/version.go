package main

import "runtime/debug"

// version is mcpd's release, set at build time with
// -ldflags "-X main.version=v1.2.3" (make build and make image do). Read it
// through buildVersion, which falls back to what Go recorded in the binary.
var version string

// buildVersion is the version mcpd reports (--version, its log, the MCP
// client info it sends): the one set at build time, else the module
// version of a `go install ...@v1.2.3`, else "dev" with the VCS revision
// when Go recorded one.
func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v, dirty := "dev", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v += "-" + s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty {
		v += "-dirty"
	}
	return v
}
