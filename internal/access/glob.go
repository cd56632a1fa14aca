package access

import "strings"

// Glob is a pattern on names: '*' matches any run of characters
// (including none, and across '/' and '_'), '?' matches exactly one
// character, and every other character matches itself. It is meant for
// qualified tool names ("mcp__github__get_*", "mcp__*__delete_*"), server
// names and resource URIs ("file:///srv/docs/*"). The zero Glob matches
// only the empty string.
type Glob struct {
	pattern string
}

// NewGlob returns the glob of pattern. Every string is a valid pattern.
func NewGlob(pattern string) Glob { return Glob{pattern: pattern} }

// String returns the pattern.
func (g Glob) String() string { return g.pattern }

// MatchesEverything reports whether the pattern is "*", the one pattern
// that grants every name, including names that do not exist yet.
func (g Glob) MatchesEverything() bool { return g.pattern == "*" }

// Match reports whether name matches the whole pattern.
func (g Glob) Match(name string) bool {
	p := g.pattern
	if !strings.ContainsAny(p, "*?") {
		return p == name
	}
	if strings.Contains(p, "?") && !isASCII(name) {
		// '?' is one character, not one byte of it.
		return matchSeq([]rune(p), []rune(name))
	}
	return matchSeq([]byte(p), []byte(name))
}

// matchSeq matches name against the pattern p, by bytes or by runes.
// Iterative matching with one backtrack point (the last '*'): linear in
// practice, and never exponential, whatever the pattern.
func matchSeq[E byte | rune](p, name []E) bool {
	var pi, ni int
	star, mark := -1, 0
	for ni < len(name) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == name[ni]) && p[pi] != '*':
			pi++
			ni++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ni
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// Globs is a list of patterns; a name matches the list when it matches
// any of them.
type Globs []Glob

// Match reports whether name matches any pattern.
func (gs Globs) Match(name string) bool {
	for _, g := range gs {
		if g.Match(name) {
			return true
		}
	}
	return false
}

// MatchesEverything reports whether the list holds the pattern "*".
func (gs Globs) MatchesEverything() bool {
	for _, g := range gs {
		if g.MatchesEverything() {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
