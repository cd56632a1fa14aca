// Package toolsearch ranks tools by relevance to a query, so that an agent
// with hundreds of tools can hand its model only the few that fit. It is
// Okapi BM25 over a tool's fields, with no model and no index kept between
// searches: ranking a few hundred tools takes well under a millisecond.
//
// The ranking, as docs/tools.md documents it:
//
//   - Text becomes terms by Tokenize: every character that is not a
//     letter, a digit or a combining mark separates words (a mark belongs
//     to the letter before it: Devanagari vowel signs, decomposed
//     accents); camelCase humps split words, an acronym ending where the
//     next word begins (HTTPServer: http, server); letter/digit
//     boundaries split them too, and a word so split also counts whole
//     (s3, ipv4, utf8: its one-character parts alone would say nothing);
//     terms are lower-cased, terms of one character and common words
//     ("the", "of", "with", ..., and "get", "tool" and "use", which say
//     nothing about a tool) are dropped, and a light suffix rule folds
//     plurals ("numbers" -> "number", "queries" -> "query", "boxes" ->
//     "box", "sizes" -> "size").
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

// MaxQueryBytes is the longest query, in bytes, that mcpd's edges accept
// (they refuse a longer one as a bad argument). Ranking costs the query's
// distinct terms times the tools searched, so a query of megabytes would
// hold a CPU for many seconds; a task described in words, even at length,
// is far shorter.
const MaxQueryBytes = 8192

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
		out   []string
		word  []rune // the term being read
		whole []rune // the run of letters and digits word belongs to
		split bool   // whether whole was split between a letter and a digit
		prev  rune   // the last letter or digit of word
	)
	add := func(w []rune) {
		if len(w) > 1 {
			t := fold(strings.ToLower(string(w)))
			if !stopWords[t] && len(t) > 1 {
				out = append(out, t)
			}
		}
	}
	// endWhole ends the term and its run: a run split between letters
	// and digits also counts whole, so that s3, ipv4 and utf8 are terms
	// of their own (their one-letter parts are not).
	endWhole := func() {
		add(word)
		if split {
			add(whole)
		}
		word, whole, split = word[:0], whole[:0], false
	}
	runes := []rune(text)
	for i, r := range runes {
		switch {
		case unicode.IsMark(r) && len(word) > 0:
			// A combining mark (a vowel sign, a virama, a decomposed
			// accent) is part of the letter before it.
			word, whole = append(word, r), append(whole, r)
			continue
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			endWhole()
			continue
		case len(word) == 0:
		case unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev) ||
			unicode.IsUpper(prev) && i+2 < len(runes) && unicode.IsLower(runes[i+1]) && unicode.IsLower(runes[i+2])):
			// A camelCase hump: a capital after a small letter or a
			// digit, or the last capital of an acronym that begins the
			// next word (HTTPServer; but not URLs).
			endWhole()
		case unicode.IsDigit(r) != unicode.IsDigit(prev):
			add(word)
			word, split = word[:0], true
		}
		word, whole = append(word, r), append(whole, r)
		prev = r
	}
	endWhole()
	return out
}

// fold is the light suffix rule: plurals become singulars. -zes is left
// to the plain -s rule but for -zzes: "sizes" and "summarizes" are -ze
// words far more often than "buzzes" is a -zz one.
func fold(t string) string {
	switch {
	case len(t) > 4 && strings.HasSuffix(t, "ies"):
		return t[:len(t)-3] + "y"
	case len(t) > 4 && (strings.HasSuffix(t, "sses") || strings.HasSuffix(t, "xes") || strings.HasSuffix(t, "zzes") ||
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
