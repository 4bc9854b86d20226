"""``if`` rules see every simple command of a line through a real shell parser (issue 23, item 2)."""

from __future__ import annotations

import pytest

from dsh.hooks._rules import parse_rule, rule_matches


def _matches(rule: str, command: str) -> bool:
    parsed = parse_rule(rule)
    assert parsed is not None
    return rule_matches(parsed, ("Bash",), {"command": command})


@pytest.mark.parametrize(
    "line",
    [
        "echo $(rm -rf build)",
        "x=`rm -rf build`",
        'echo "$(rm -rf build)"',
        "ls; rm -rf build",
        "true && rm -rf build",
        "false || rm -rf build",
        "ls | rm -rf build",
        "ls\nrm -rf build",
        "(cd x && rm -rf build)",
        "{ rm -rf build; }",
        "if true; then rm -rf build; fi",
        "for d in a b; do rm -rf $d; done",
        "env X=1 rm -rf build",
        "FOO=bar rm -rf build",
        "command rm -rf build",
        "sudo -u root rm -rf build",
        "\\rm -rf build",
        "'rm' -rf build",
        "   rm -rf build",
        "cat <(rm -rf build)",
        "echo ${x:-$(rm -rf build)}",
        "cat <<EOF\n$(rm -rf build)\nEOF",
        # found by a hostile review: a path to the program, and wrappers past the first list
        "/bin/rm -rf build",
        "./rm -rf build",
        "/usr/bin/env rm -rf build",
        "coproc rm -rf build",
        "setsid rm -rf build",
        "flock /tmp/l rm -rf build",
        "ionice -c3 rm -rf build",
        "chrt -o 0 rm -rf build",
        "taskset 1 rm -rf build",
        "unshare -r rm -rf build",
        "find . -name '*.o' -exec rm {} \\;",
        "find . -execdir /bin/rm {} +",
        "r\\\nm -rf build",  # a backslash-newline inside the name: bash reads rm
    ],
)
def test_every_simple_command_of_the_line_is_checked(line: str) -> None:
    assert _matches("Bash(rm *)", line)


@pytest.mark.parametrize(
    "line",
    [
        *("echo rm -rf build", "echo 'rm -rf build'", "rmdir build", "ls -l # rm -rf x", "find . -name rm"),
        *("/bin/rmdir x", "echo $(date) `date`", "echo $((1 + 2))", "ls -l *.txt", "grep -r 'a[b]' ."),
        *("[ -f x ] && echo y", "[[ -f x ]] || echo n"),
    ],
)
def test_words_that_are_not_a_command_do_not_match(line: str) -> None:
    assert not _matches("Bash(rm *)", line)


@pytest.mark.parametrize(
    "line",
    [
        "eval 'rm -rf build'",
        "bash -c 'rm -rf build'",
        '"$cmd" -rf build',
        "$(echo rm) -rf build",
        "echo $(",
        "a=(",
        "/bin/bash -c 'rm -rf build'",
        "/bin/sh -c 'rm -rf build'",
        "trap 'rm -rf build' EXIT",
        "mapfile -C 'rm -rf build #' -c 1 <<< x",
        "script -qc 'rm -rf build' /dev/null",
        "watch -n1 'rm -rf build'",
        "ssh host rm -rf build",
        "find . -exec sh -c 'rm -rf build' \\;",
        # found re-attacking the fix: expansions bash performs that the grammar reads as plain text
        "/usr/bin/r[m] -rf build",
        "/usr/bin/r? -rf build",
        "hash -p /usr/bin/rm del; del -rf build",
        "shopt -s expand_aliases; alias del=rm\ndel -rf build",
        "x='a[$(rm -rf build)]'; echo $((x))",
        "let 'a[$(rm -rf build)]=1'",
        "PS4='$(rm -rf build)'; set -x; :",
        "x='$(rm -rf build)'; echo ${x@P}",
        "env -S'rm -rf build'",
        "env --split-string='rm -rf build'",
    ],
)
def test_a_line_that_cannot_be_read_with_certainty_runs_the_hook(line: str) -> None:
    assert _matches("Bash(git *)", line)


def test_prefix_and_older_forms_still_hold() -> None:
    assert _matches("Bash(git *)", "git") and _matches("Bash(git *)", "cd x && git push")
    assert not _matches("Bash(git *)", "gitk") and _matches("Bash(npm run:*)", "npm run test")
    assert not _matches("Bash(git push *)", "git pull origin")


def test_a_command_line_that_is_not_utf8_is_read_not_a_crash() -> None:
    # Bytes that were not UTF-8 reach dsh as surrogate escapes (as Python decodes argv).
    assert _matches("Bash(rm *)", "rm \udcff") and not _matches("Bash(rm *)", "echo \udcff")
