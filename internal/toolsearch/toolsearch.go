// Package toolsearch ranks tools by relevance to a query, so that an agent
// with hundreds of tools can hand its model only the few that fit. It is
// Okapi BM25 over a tool's fields, with no model and no index kept between
// searches: ranking a few hundred tools takes well under a millisecond.
//
// The ranking, as docs/tools.md documents it:
//
//   - Text becomes terms by Tokenize: camelCase and letter/digit
//     boundaries split words, every character that is not a letter or a
//     digit separates them, terms are lower-cased, terms of one character
//     and common words ("the", "of", "with", ..., and "get", "tool" and
//     "use", which say nothing about a tool) are dropped, and a
//     light suffix rule folds plurals ("numbers" -> "number", "queries" ->
//     "query", "boxes" -> "box").
//   - A tool's terms come from its name (weight 3), title (weight 2),
//     description (1) and the names of its parameters (1): a term's
//     frequency in a tool is the weighted count of its occurrences, and the
//     tool's length is the weighted count of all its terms (BM25F with one
//     shared length normalisation).
//   - The score of a tool is the sum, over the distinct terms of the
//     query, of idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len /
//     avglen)) with k1 = 1.2, b = 0.75 and idf(t) = ln(1 + (N - n(t) + 0.5)
//     / (n(t) + 0.5)), N the number of tools searched and n(t) those that
//     contain t.
//   - Tools that share no term with the query are left out; equal scores
//     are ordered by the tools' IDs (qualified names), so the same tools
//     and query always give the same order.
package toolsearch

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"unicode"
)

// BM25 parameters.
const (
	k1 = 1.2
	b  = 0.75
)

// Field weights: a term of a tool's name says more than one of its
// description.
const (
	weightName        = 3
	weightTitle       = 2
	weightDescription = 1
	weightParameter   = 1
)

// Document is one tool as the search sees it.
type Document struct {
	// ID breaks ties; the qualified tool name.
	ID          string
	Name        string
	Title       string
	Description string
	// Parameters are the names of the tool's arguments.
	Parameters []string
}

// Match is a document that matches a query.
type Match struct {
	// Index is the document's position in the slice given to Rank.
	Index int
	Score float64
}

// Rank scores docs against query and returns the best limit matches, best
// first (limit <= 0: all). A query without terms matches nothing.
func Rank(docs []Document, query string, limit int) []Match {
	terms := uniq(Tokenize(query))
	if len(terms) == 0 || len(docs) == 0 {
		return nil
	}
	tfs := make([]map[string]float64, len(docs))
	lens := make([]float64, len(docs))
	var total float64
	df := make(map[string]int, len(terms))
	for i, d := range docs {
		tf := make(map[string]float64)
		add := func(text string, w float64) {
			for _, t := range Tokenize(text) {
				tf[t] += w
				lens[i] += w
			}
		}
		add(d.Name, weightName)
		add(d.Title, weightTitle)
		add(d.Description, weightDescription)
		for _, p := range d.Parameters {
			add(p, weightParameter)
		}
		tfs[i] = tf
		total += lens[i]
		for _, t := range terms {
			if tf[t] > 0 {
				df[t]++
			}
		}
	}
	n := float64(len(docs))
	avg := total / n
	if avg == 0 {
		avg = 1
	}
	var out []Match
	for i := range docs {
		var score float64
		for _, t := range terms {
			f := tfs[i][t]
			if f == 0 {
				continue
			}
			idf := math.Log(1 + (n-float64(df[t])+0.5)/(float64(df[t])+0.5))
			score += idf * f * (k1 + 1) / (f + k1*(1-b+b*lens[i]/avg))
		}
		if score > 0 {
			out = append(out, Match{Index: i, Score: score})
		}
	}
	slices.SortFunc(out, func(x, y Match) int {
		if c := cmp.Compare(y.Score, x.Score); c != 0 {
			return c
		}
		return strings.Compare(docs[x.Index].ID, docs[y.Index].ID)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// Tokenize splits text into search terms (see the package comment).
func Tokenize(text string) []string {
	var (
		out  []string
		word []rune
	)
	flush := func() {
		if len(word) > 1 {
			t := fold(strings.ToLower(string(word)))
			if !stopWords[t] && len(t) > 1 {
				out = append(out, t)
			}
		}
		word = word[:0]
	}
	var prev rune
	for _, r := range text {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case len(word) > 0 && (unicode.IsUpper(r) && unicode.IsLower(prev) ||
			unicode.IsDigit(r) != unicode.IsDigit(prev)):
			flush()
			word = append(word, r)
		default:
			word = append(word, r)
		}
		prev = r
	}
	flush()
	return out
}

// fold is the light suffix rule: plurals become singulars.
func fold(t string) string {
	switch {
	case len(t) > 4 && strings.HasSuffix(t, "ies"):
		return t[:len(t)-3] + "y"
	case len(t) > 4 && (strings.HasSuffix(t, "sses") || strings.HasSuffix(t, "xes") || strings.HasSuffix(t, "zes") ||
		strings.HasSuffix(t, "ches") || strings.HasSuffix(t, "shes")):
		return t[:len(t)-2]
	case len(t) > 3 && strings.HasSuffix(t, "s") && !strings.HasSuffix(t, "ss") &&
		!strings.HasSuffix(t, "us") && !strings.HasSuffix(t, "is"):
		return t[:len(t)-1]
	}
	return t
}

// uniq returns terms without repeats, in first-seen order, so that a
// query's score sums in a fixed order.
func uniq(terms []string) []string {
	seen := make(map[string]bool, len(terms))
	out := terms[:0:0]
	for _, t := range terms {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// stopWords are common English words that say nothing about a tool.
var stopWords = map[string]bool{
	"an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true,
	"can": true, "do": true, "for": true, "from": true, "how": true, "if": true, "in": true,
	"into": true, "is": true, "it": true, "its": true, "me": true, "my": true, "of": true,
	"on": true, "or": true, "so": true, "some": true, "that": true, "the": true, "then": true,
	"this": true, "to": true, "tool": true, "use": true, "want": true, "was": true, "what": true,
	"when": true, "which": true, "with": true, "you": true, "your": true, "need": true,
	"please": true, "get": true,
}
