package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/client"
)

// newPRCmd returns "ghost pr" and its subcommands: pull requests, through
// the API against a server or on the store (docs/adr/0100-cli-modes.md,
// docs/adr/0118-pull-request-records.md).
func newPRCmd(env *Env) *cobra.Command {
	return newGroupCmd("pr", "pull requests: create, list, view, comment, review, merge, close, reopen",
		newPRCreateCmd(env),
		newPRListCmd(env),
		newPRViewCmd(env),
		newPRCommentCmd(env),
		newPRReviewCmd(env),
		newPRMergeCmd(env),
		newPRStateCmd(env, "close", "closed"),
		newPRStateCmd(env, "reopen", "open"),
	)
}

// prStore is what the pr commands ask of the store mode: the API's pull
// requests, which need a repository cache and the push path.
var prStore = storeOptions{pulls: true}

// prNumber reads a pull request's number, with or without '#'.
func prNumber(s string) (uint64, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "#"), 10, 64)
	if err != nil || n == 0 {
		return 0, usageErrorf("%q: want a pull-request number", s)
	}
	return n, nil
}

func newPRCreateCmd(env *Env) *cobra.Command {
	var head, base, title, body, bodyFile string
	cmd := &cobra.Command{
		Use:   "create <owner>/<name> --head BRANCH --base BRANCH --title TITLE [--body TEXT | --body-file FILE]",
		Short: "open a pull request",
		Long: `Open a pull request to merge --head into --base of <owner>/<name>.

--head is a branch of the repository, or OWNER:BRANCH for the branch of
OWNER's fork of it. The server keeps refs/pull/<n>/head on the
repository, at the head branch's tip as it is pushed, so that
git fetch origin pull/<n>/head works.`,
		Args: exactArgs(1),
	}
	cmd.Flags().StringVar(&head, "head", "", "the branch to merge (OWNER:BRANCH for a fork's)")
	cmd.Flags().StringVar(&base, "base", "", "the branch to merge into")
	cmd.Flags().StringVar(&title, "title", "", "the title")
	cmd.Flags().StringVar(&body, "body", "", "the description (Markdown)")
	cmd.Flags().StringVar(&bodyFile, "body-file", "", "read the description from FILE (- for stdin)")
	t := newTarget(env, cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		if head == "" || base == "" || title == "" {
			return usageErrorf("--head, --base and --title are required")
		}
		if body, err = readBody(cmd, body, bodyFile); err != nil {
			return err
		}
		return t.runAPI(true, prStore, func(ctx context.Context, c *conn, _ []string) error {
			pr, err := c.CreatePull(ctx, owner, name, client.NewPull{Title: title, Body: body, Head: head, Base: base})
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "created pull request #%d: %s (%s into %s)\n", pr.Number, pr.Title, pr.Head.Label, pr.Base.Ref)
			return nil
		})(cmd, args)
	}
	return cmd
}

func newPRListCmd(env *Env) *cobra.Command {
	var state string
	var limit int
	cmd := &cobra.Command{
		Use:   "list <owner>/<name> [--state open|closed|all]",
		Short: "list pull requests, newest first",
		Args:  exactArgs(1),
	}
	cmd.Flags().StringVar(&state, "state", "open", "which: open, closed (merged ones too) or all")
	cmd.Flags().IntVar(&limit, "limit", 0, "list at most this many (0: all)")
	t := newTarget(env, cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		switch {
		case state != "open" && state != "closed" && state != "all":
			return usageErrorf("--state %q: want open, closed or all", state)
		case limit < 0:
			return usageErrorf("--limit %d: want 0 (all) or more", limit)
		}
		return t.runAPI(false, prStore, func(ctx context.Context, c *conn, _ []string) error {
			tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "#\tTITLE\tBRANCHES\tSTATE\tAUTHOR\tUPDATED")
			var after uint64
			shown := 0
			for {
				n := 0
				if limit > 0 {
					n = min(limit-shown, 100)
				}
				prs, next, err := c.ListPullsPage(ctx, owner, name, state, after, n)
				if err != nil {
					return err
				}
				for _, pr := range prs {
					fmt.Fprintf(tw, "%d\t%s\t%s -> %s\t%s\t%s\t%s\n", pr.Number, oneLine(pr.Title), pr.Head.Label, pr.Base.Ref, prState(pr), userLogin(pr.User), pr.UpdatedAt.Format(time.RFC3339))
				}
				shown += len(prs)
				if next == 0 || limit > 0 && shown >= limit {
					break
				}
				after = next
			}
			return tw.Flush()
		})(cmd, args)
	}
	return cmd
}

func prState(pr client.Pull) string {
	switch {
	case pr.Merged:
		return "merged"
	case pr.Merging:
		return "merging"
	}
	return pr.State
}

func userLogin(u *client.PullUser) string {
	if u == nil {
		return ""
	}
	return u.Login
}

// printable keeps what a person wrote (a body, a commit message, a
// patch) readable on a terminal without letting it drive the terminal:
// control characters but newlines and tabs become '?'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || r >= 0x20 && r != 0x7f && (r < 0x80 || r > 0x9f) && r != utf8.RuneError {
			return r
		}
		return '?'
	}, s)
}

func newPRViewCmd(env *Env) *cobra.Command {
	var format string
	var commits, files, conversation bool
	cmd := &cobra.Command{
		Use:   "view <owner>/<name> <number> [--commits] [--files] [--comments] [--format text|json]",
		Short: "show a pull request: its state, branches, whether it merges cleanly",
		Args:  exactArgs(2),
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	cmd.Flags().BoolVar(&commits, "commits", false, "also list its commits (up to 100)")
	cmd.Flags().BoolVar(&files, "files", false, "also list the files it changes (up to 100), with their diffs")
	cmd.Flags().BoolVar(&conversation, "comments", false, "also show its reviews and comments (up to 100 each), oldest first")
	t := newTarget(env, cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		n, err := prNumber(args[1])
		if err != nil {
			return err
		}
		if format != "text" && format != "json" {
			return usageErrorf("--format %q: want text or json", format)
		}
		return t.runAPI(false, prStore, func(ctx context.Context, c *conn, _ []string) error {
			pr, err := c.Pull(ctx, owner, name, n)
			if err != nil {
				return err
			}
			var cs []client.PullCommit
			var fs []client.PullFile
			if commits {
				if cs, err = c.PullCommits(ctx, owner, name, n, 1, 100); err != nil {
					return err
				}
			}
			if files {
				if fs, err = c.PullFiles(ctx, owner, name, n, 1, 100); err != nil {
					return err
				}
			}
			var reviews, comments []client.PullNote
			if conversation {
				if reviews, _, err = c.PullNotes(ctx, owner, name, n, "reviews", 0, 100); err != nil {
					return err
				}
				if comments, _, err = c.PullNotes(ctx, owner, name, n, "comments", 0, 100); err != nil {
					return err
				}
			}
			if format == "json" {
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					client.Pull
					Commits  []client.PullCommit `json:"commits,omitempty"`
					Files    []client.PullFile   `json:"files,omitempty"`
					Reviews  []client.PullNote   `json:"reviews,omitempty"`
					Comments []client.PullNote   `json:"comments,omitempty"`
				}{pr, cs, fs, reviews, comments})
			}
			w := env.Stdout
			fmt.Fprintf(w, "#%d %s\n", pr.Number, printable(pr.Title))
			fmt.Fprintf(w, "state:     %s\n", prState(pr))
			fmt.Fprintf(w, "author:    %s\n", userLogin(pr.User))
			fmt.Fprintf(w, "branches:  %s -> %s\n", pr.Head.Label, pr.Base.Ref)
			fmt.Fprintf(w, "head:      %s\n", pr.Head.SHA)
			fmt.Fprintf(w, "base:      %s\n", pr.Base.SHA)
			switch {
			case pr.Merged:
				fmt.Fprintf(w, "merged:    %s by %s (%s) as %s\n", pr.MergedAt.Format(time.RFC3339), userLogin(pr.MergedBy), pr.MergeMethod, deref(pr.MergeCommitSHA))
			case pr.Mergeable != nil && *pr.Mergeable:
				fmt.Fprintf(w, "mergeable: yes\n")
			case pr.Mergeable != nil:
				fmt.Fprintf(w, "mergeable: no, conflicts in %s\n", oneLine(strings.Join(pr.ConflictingFiles, ", ")))
			case pr.State == "open":
				fmt.Fprintf(w, "mergeable: unknown\n")
			}
			if pr.Body != "" {
				fmt.Fprintf(w, "\n%s\n", printable(strings.TrimRight(pr.Body, "\n")))
			}
			if conversation {
				printConversation(w, reviews, comments)
			}
			if len(cs) > 0 {
				fmt.Fprintf(w, "\ncommits:\n")
				for _, cm := range cs {
					subject, _, _ := strings.Cut(cm.Commit.Message, "\n")
					fmt.Fprintf(w, "  %s %s (%s)\n", cm.SHA[:12], oneLine(subject), oneLine(cm.Commit.Author.Name))
				}
			}
			if len(fs) > 0 {
				fmt.Fprintf(w, "\nfiles:\n")
				for _, f := range fs {
					name := f.Filename
					if f.PreviousFilename != "" {
						name = f.PreviousFilename + " -> " + f.Filename
					}
					fmt.Fprintf(w, "  %-8s +%d -%d %s\n", f.Status, f.Additions, f.Deletions, oneLine(name))
				}
				for _, f := range fs {
					if f.Patch != "" {
						fmt.Fprintf(w, "\n--- %s\n%s", oneLine(f.Filename), printable(f.Patch))
					}
				}
			}
			return nil
		})(cmd, args)
	}
	return cmd
}

// printConversation prints reviews and comments merged oldest first
// (their ids grow with time).
func printConversation(w io.Writer, reviews, comments []client.PullNote) {
	all := append(slices.Clone(reviews), comments...)
	isReview := make(map[uint64]bool, len(reviews))
	for _, r := range reviews {
		isReview[r.ID] = true
	}
	slices.SortFunc(all, func(a, b client.PullNote) int { return cmp.Compare(a.ID, b.ID) })
	if len(all) > 0 {
		fmt.Fprintf(w, "\nconversation:\n")
	}
	for _, c := range all {
		what := "commented"
		if isReview[c.ID] {
			what = "reviewed: " + strings.ToLower(strings.ReplaceAll(c.State, "_", " "))
		}
		fmt.Fprintf(w, "  %s %s\n", oneLine(userLogin(c.User)), what)
		if c.Body != "" {
			for _, line := range strings.Split(strings.TrimRight(printable(c.Body), "\n"), "\n") {
				fmt.Fprintf(w, "    %s\n", line)
			}
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func newPRMergeCmd(env *Env) *cobra.Command {
	var method, sha, title, message string
	var deleteBranch bool
	cmd := &cobra.Command{
		Use:   "merge <owner>/<name> <number> [--method merge|squash|rebase] [--sha SHA] [--delete-branch]",
		Short: "merge a pull request on the server",
		Long: `Merge a pull request on the server, with no work tree: a merge commit
(--method merge, the default), one squashed commit (squash), or the head's
commits replayed on the base (rebase), as the repository allows
(ghost repo set --allow-merge-commit|--allow-squash-merge|--allow-rebase-merge).

The merge is committed like a push, with the base branch's old tip as its
precondition: if a push moved the base meanwhile, nothing is written and
the merge says "base branch changed; try again". Push protection checks
it as it checks a push. --sha makes sure the head is the commit you
reviewed; --delete-branch deletes the head branch with the merge.`,
		Args: exactArgs(2),
	}
	cmd.Flags().StringVar(&method, "method", "merge", "merge, squash or rebase")
	cmd.Flags().StringVar(&sha, "sha", "", "merge only if the head is this commit")
	cmd.Flags().StringVar(&title, "title", "", "the merge or squash commit's title")
	cmd.Flags().StringVar(&message, "message", "", "the merge or squash commit's message")
	cmd.Flags().BoolVar(&deleteBranch, "delete-branch", false, "delete the head branch once merged")
	t := newTarget(env, cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		n, err := prNumber(args[1])
		if err != nil {
			return err
		}
		if method != "merge" && method != "squash" && method != "rebase" {
			return usageErrorf("--method %q: want merge, squash or rebase", method)
		}
		return t.runAPI(true, prStore, func(ctx context.Context, c *conn, _ []string) error {
			res, err := c.MergePull(ctx, owner, name, n, client.PullMerge{MergeMethod: method, SHA: sha, CommitTitle: title, CommitMessage: message, DeleteBranch: deleteBranch})
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "merged pull request #%d (%s): %s\n", n, method, res.SHA)
			return nil
		})(cmd, args)
	}
	return cmd
}

// readBody returns --body, or what --body-file names (- for stdin, at
// most 1 MiB).
func readBody(cmd *cobra.Command, body, bodyFile string) (string, error) {
	if bodyFile == "" {
		return body, nil
	}
	if body != "" {
		return "", usageErrorf("--body and --body-file exclude each other")
	}
	var b []byte
	var err error
	if bodyFile == "-" {
		b, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20))
	} else {
		b, err = os.ReadFile(bodyFile)
	}
	if err != nil {
		return "", fmt.Errorf("--body-file: %w", err)
	}
	return string(b), nil
}

// newPRCommentCmd returns "ghost pr comment".
func newPRCommentCmd(env *Env) *cobra.Command {
	var body, bodyFile string
	cmd := &cobra.Command{
		Use:   "comment <owner>/<name> <number> (--body TEXT | --body-file FILE)",
		Short: "comment on a pull request's conversation",
		Args:  exactArgs(2),
	}
	cmd.Flags().StringVar(&body, "body", "", "the comment (Markdown)")
	cmd.Flags().StringVar(&bodyFile, "body-file", "", "read the comment from FILE (- for stdin)")
	t := newTarget(env, cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		n, err := prNumber(args[1])
		if err != nil {
			return err
		}
		if body, err = readBody(cmd, body, bodyFile); err != nil {
			return err
		}
		if body == "" {
			return usageErrorf("--body or --body-file is required")
		}
		return t.runAPI(true, prStore, func(ctx context.Context, c *conn, _ []string) error {
			note, err := c.CommentPull(ctx, owner, name, n, body)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "commented on pull request #%d (comment %d)\n", n, note.ID)
			return nil
		})(cmd, args)
	}
	return cmd
}

// newPRReviewCmd returns "ghost pr review".
func newPRReviewCmd(env *Env) *cobra.Command {
	var body, bodyFile, sha string
	var approve, requestChanges, comment bool
	cmd := &cobra.Command{
		Use:   "review <owner>/<name> <number> (--approve | --request-changes | --comment) [--body TEXT | --body-file FILE] [--sha SHA]",
		Short: "review a pull request: approve it, request changes or comment",
		Long: `Review a pull request. A branch rule with --required-approvals (ghost repo
protect) holds the merge until that many writers other than its author
approve, and a writer's change request holds it until that writer
approves; with --dismiss-stale-approvals only reviews of the head being
merged count. --sha names the head you reviewed (default: the current
head). Requesting changes and commenting need a body.`,
		Args: exactArgs(2),
	}
	f := cmd.Flags()
	f.BoolVar(&approve, "approve", false, "approve the pull request")
	f.BoolVar(&requestChanges, "request-changes", false, "request changes")
	f.BoolVar(&comment, "comment", false, "comment without approving or requesting changes")
	f.StringVar(&body, "body", "", "the review's text (Markdown)")
	f.StringVar(&bodyFile, "body-file", "", "read the review's text from FILE (- for stdin)")
	f.StringVar(&sha, "sha", "", "the head commit reviewed")
	t := newTarget(env, cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		n, err := prNumber(args[1])
		if err != nil {
			return err
		}
		var event string
		switch {
		case approve && !requestChanges && !comment:
			event = "APPROVE"
		case requestChanges && !approve && !comment:
			event = "REQUEST_CHANGES"
		case comment && !approve && !requestChanges:
			event = "COMMENT"
		default:
			return usageErrorf("give one of --approve, --request-changes and --comment")
		}
		if body, err = readBody(cmd, body, bodyFile); err != nil {
			return err
		}
		return t.runAPI(true, prStore, func(ctx context.Context, c *conn, _ []string) error {
			rv, err := c.ReviewPull(ctx, owner, name, n, client.NewPullReview{Event: event, Body: body, CommitID: sha})
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "reviewed pull request #%d: %s (review %d)\n", n, strings.ToLower(strings.ReplaceAll(rv.State, "_", " ")), rv.ID)
			return nil
		})(cmd, args)
	}
	return cmd
}

// newPRStateCmd returns "ghost pr close" or "ghost pr reopen".
func newPRStateCmd(env *Env, verb, state string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   verb + " <owner>/<name> <number>",
		Short: verb + " a pull request",
		Args:  exactArgs(2),
	}
	t := newTarget(env, cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		n, err := prNumber(args[1])
		if err != nil {
			return err
		}
		return t.runAPI(true, prStore, func(ctx context.Context, c *conn, _ []string) error {
			st := state
			pr, err := c.UpdatePull(ctx, owner, name, n, client.PullEdit{State: &st})
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "pull request #%d is %s\n", pr.Number, prState(pr))
			return nil
		})(cmd, args)
	}
	return cmd
}
