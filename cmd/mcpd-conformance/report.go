package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// The report judges each scenario the suite ran from the files the suite
// leaves in its output directory (-o): <dir>/<scenario>-<timestamp>/
// checks.json, stdout.txt and stderr.txt.
//
// A scenario passes when its checks hold no FAILURE or WARNING and at least
// one SUCCESS (a scenario that saw no traffic reports no checks at all), and
// the driver printed a PASS verdict (the suite's parallel mode ignores the
// client's exit code). A required scenario that fails must be in the
// baseline, and a baselined one must fail, so the baseline stays honest.

// resultDirName is how the suite names a result directory: the scenario,
// then the ISO time with ':' and '.' replaced by '-'.
var resultDirName = regexp.MustCompile(`^(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// check is the part of a suite check the report reads.
type check struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Status       string `json:"status"`
	Description  string `json:"description"`
	ErrorMessage string `json:"errorMessage"`
}

// outcome is one scenario run as the suite recorded it.
type outcome struct {
	scenario string
	dir      string
	checks   []check
	verdict  string // the driver's verdict line without its prefix; "" if none
	// noDriver: a server scenario, where the suite itself is the client
	// and no driver prints a verdict.
	noDriver bool
}

// failures explains why the run fails; none means it passes.
func (o *outcome) failures() []string {
	var out []string
	success := false
	for _, c := range o.checks {
		switch c.Status {
		case "SUCCESS":
			success = true
		case "FAILURE", "WARNING":
			msg := c.ErrorMessage
			if msg == "" {
				msg = c.Description
			}
			out = append(out, fmt.Sprintf("%s %s (%s): %s", c.Status, c.ID, c.Name, firstLine(msg)))
		}
	}
	if !success && len(out) == 0 {
		out = append(out, "no passing check: the scenario server saw nothing to judge")
	}
	switch {
	case o.noDriver:
	case o.verdict == "":
		out = append(out, "driver printed no verdict (killed by the suite's timeout?)")
	case o.verdict != "PASS":
		out = append(out, "driver: "+o.verdict)
	}
	return out
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// readResults reads every scenario result under dir. A scenario that has
// several results (reruns into the same directory) keeps the newest. For
// the server leg the suite names each result "server-<scenario>-...".
func readResults(dir, leg string) (map[string]*outcome, error) {
	out := make(map[string]*outcome)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != "checks.json" {
			return nil
		}
		resDir := filepath.Dir(path)
		rel, err := filepath.Rel(dir, resDir)
		if err != nil {
			return err
		}
		m := resultDirName.FindStringSubmatch(filepath.ToSlash(rel))
		if m == nil {
			return fmt.Errorf("%s: not named <scenario>-<timestamp>", resDir)
		}
		o := &outcome{scenario: m[1], dir: resDir}
		if leg == legServer {
			o.scenario = strings.TrimPrefix(o.scenario, "server-")
			o.noDriver = true
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &o.checks); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		o.verdict, err = readVerdict(filepath.Join(resDir, "stdout.txt"))
		if err != nil {
			return err
		}
		if prev, ok := out[o.scenario]; !ok || prev.dir < o.dir {
			out[o.scenario] = o
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	return out, nil
}

// readVerdict returns the last verdict the driver printed in path, without
// its prefix, or "" when there is none.
func readVerdict(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	verdict := ""
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), verdictPrefix); ok {
			verdict = v
		}
	}
	return verdict, sc.Err()
}

// The legs of a requirement set: the scenarios of the suite's client
// subcommand measure mcpd as an MCP client, those of its server subcommand
// mcpd's MCP endpoint.
const (
	legClient = "client"
	legServer = "server"
)

// requirements is one leg of one requirement set of the suite
// (requirements/<revision>.yaml).
type requirements struct {
	revision  string
	leg       string
	required  []string
	notScored map[string]string // scenario -> reason
}

// scoredExtension reports whether a not-scored scenario is scored here all
// the same: the authorization extensions (client credentials, workload
// identity, enterprise-managed authorization, DPoP), which mcpd implements
// and must keep passing.
func scoredExtension(scenario, reason string) bool {
	return reason == "extension" && strings.HasPrefix(scenario, "auth/")
}

// parseRequirements reads one leg of a requirement set. The files are
// frozen and plain: top-level keys "server", "client", "not_scored"; list
// items "  - name"; not_scored items with scenario, leg and reason.
func parseRequirements(revision, leg string, r io.Reader) (*requirements, error) {
	req := &requirements{revision: revision, leg: leg, notScored: make(map[string]string)}
	section := ""
	var item map[string]string
	flush := func() {
		if item != nil && item["leg"] == leg && item["scenario"] != "" {
			if leg == legClient && scoredExtension(item["scenario"], item["reason"]) {
				req.required = append(req.required, item["scenario"])
			} else {
				req.notScored[item["scenario"]] = item["reason"]
			}
		}
		item = nil
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if !strings.HasPrefix(line, " ") {
			flush()
			section = strings.TrimSuffix(trimmed, ":")
			continue
		}
		rest, isItem := strings.CutPrefix(trimmed, "- ")
		switch section {
		case leg:
			if isItem {
				req.required = append(req.required, strings.TrimSpace(rest))
			}
		case "not_scored":
			if isItem {
				flush()
				item = make(map[string]string)
			}
			if k, v, ok := strings.Cut(rest, ":"); ok && item != nil {
				item[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(req.required) == 0 {
		return nil, fmt.Errorf("requirements %s: no %s scenarios", revision, leg)
	}
	return req, nil
}

// baseline is the expected-failures file: one scenario per line, then a
// one-line reason; "#" starts a comment.
type baseline map[string]string

// parseBaseline reads a baseline. For the client leg only authorization
// scenarios may be listed: everything else mcpd must pass. For the server
// leg every entry needs its reason all the same.
func parseBaseline(r io.Reader, leg string) (baseline, error) {
	b := make(baseline)
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, _ := strings.Cut(line, " ")
		reason = strings.TrimSpace(reason)
		switch {
		case reason == "":
			return nil, fmt.Errorf("line %d: %s has no reason", n, name)
		case leg == legClient && !strings.HasPrefix(name, "auth/"):
			return nil, fmt.Errorf("line %d: %s is not an authorization scenario; only those may be expected to fail", n, name)
		case b[name] != "":
			return nil, fmt.Errorf("line %d: %s is listed twice", n, name)
		}
		b[name] = reason
	}
	return b, sc.Err()
}

// revisionRun is one suite run: a requirement set and its results.
type revisionRun struct {
	req     *requirements
	results map[string]*outcome
}

// judge writes the report of runs against base and says whether it holds:
// every required scenario passes or is baselined and fails, and every
// baseline entry is a required scenario of some run.
func judge(w io.Writer, runs []revisionRun, base baseline) bool {
	ok := true
	used := make(map[string]bool)
	var pass, expected, unexpected, stale int
	for _, run := range runs {
		fmt.Fprintf(w, "\n== requirements %s: %d required %s scenarios\n", run.req.revision, len(run.req.required), run.req.leg)
		for _, name := range run.req.required {
			reason, baselined := base[name]
			if baselined {
				used[name] = true
			}
			o, ran := run.results[name]
			var fails []string
			if !ran {
				fails = []string{"no result: the suite did not run it"}
			} else {
				fails = o.failures()
			}
			switch {
			case len(fails) == 0 && !baselined:
				pass++
				fmt.Fprintf(w, "  PASS                %s\n", name)
			case len(fails) == 0 && baselined:
				stale++
				ok = false
				fmt.Fprintf(w, "  STALE (now passes)  %s: remove it from the baseline\n", name)
			case baselined:
				expected++
				fmt.Fprintf(w, "  FAIL (expected)     %s: %s\n", name, reason)
			default:
				unexpected++
				ok = false
				fmt.Fprintf(w, "  FAIL                %s\n", name)
				for _, f := range fails {
					fmt.Fprintf(w, "      %s\n", f)
				}
				if ran {
					fmt.Fprintf(w, "      results: %s\n", o.dir)
				}
			}
		}
		var extra []string
		for name := range run.results {
			if !slices.Contains(run.req.required, name) {
				extra = append(extra, name)
			}
		}
		slices.Sort(extra)
		if len(extra) > 0 {
			fmt.Fprintf(w, "  not scored (reported only):\n")
		}
		for _, name := range extra {
			state := "pass"
			if len(run.results[name].failures()) > 0 {
				state = "fail"
			}
			reason := run.req.notScored[name]
			if reason == "" {
				reason = "not in the requirement set"
			}
			fmt.Fprintf(w, "    %-4s %s (%s)\n", state, name, reason)
		}
	}
	var unknown []string
	for name := range base {
		if !used[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, name := range unknown {
		ok = false
		fmt.Fprintf(w, "  UNKNOWN baseline entry %s: not a required scenario of any run; remove it\n", name)
	}
	fmt.Fprintf(w, "\nconformance: %d required scenario runs pass, %d fail as the baseline expects, %d fail unexpectedly, %d baseline entries are stale, %d unknown\n",
		pass, expected, unexpected, stale, len(unknown))
	return ok
}

// runReport is "mcpd-conformance report".
func runReport(args []string, stdout io.Writer) (bool, error) {
	fs := flag.NewFlagSet("mcpd-conformance report", flag.ContinueOnError)
	fs.SetOutput(stdout)
	baselinePath := fs.String("baseline", "conformance/expected-failures.txt", "expected-failures file")
	reqDir := fs.String("requirements-dir", "", "the suite's requirements/ directory (<revision>.yaml files)")
	leg := fs.String("leg", legClient, "which scenarios the results are of: client (mcpd as an MCP client) or server (mcpd's MCP endpoint)")
	fs.Usage = func() {
		fmt.Fprintln(stdout, "usage: mcpd-conformance report -requirements-dir DIR [-baseline FILE] REVISION=RESULTS_DIR...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	if *leg != legClient && *leg != legServer {
		return false, fmt.Errorf("-leg %q: want client or server", *leg)
	}
	if *reqDir == "" || fs.NArg() == 0 {
		fs.Usage()
		return false, errors.New("want -requirements-dir and at least one REVISION=RESULTS_DIR")
	}
	f, err := os.Open(*baselinePath)
	if err != nil {
		return false, err
	}
	base, err := parseBaseline(f, *leg)
	f.Close()
	if err != nil {
		return false, fmt.Errorf("%s: %w", *baselinePath, err)
	}
	var runs []revisionRun
	for _, arg := range fs.Args() {
		rev, dir, ok := strings.Cut(arg, "=")
		if !ok || rev == "" || dir == "" {
			return false, fmt.Errorf("%q: want REVISION=RESULTS_DIR", arg)
		}
		rf, err := os.Open(filepath.Join(*reqDir, rev+".yaml"))
		if err != nil {
			return false, err
		}
		req, err := parseRequirements(rev, *leg, rf)
		rf.Close()
		if err != nil {
			return false, err
		}
		results, err := readResults(dir, *leg)
		if err != nil {
			return false, err
		}
		runs = append(runs, revisionRun{req: req, results: results})
	}
	return judge(stdout, runs, base), nil
}
