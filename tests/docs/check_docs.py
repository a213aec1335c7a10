#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""check_docs.py: the README and the manual in docs/ hold together.

Checks that every relative link of README.md and docs/*.md names a file of
the repository and, with a #fragment, a heading of that page (GitHub's
anchors); that the manual's table of contents (docs/README.md) lists every
page; that no page points outside the repository; and that the README stays
short.

    tests/docs/check_docs.py SOURCE_DIR
"""
import os
import re
import sys

README_MAX_LINES = 300
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")


def anchor(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped,
    spaces as hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose_lines(path):
    """The lines outside code fences, with their numbers."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield n, line


def anchors(path):
    found = set()
    for _, line in prose_lines(path):
        m = re.match(r"^(#+)\s+(.*)$", line)
        if m:
            found.add(anchor(m.group(2)))
    return found


def check_page(root, path, problems):
    rel = os.path.relpath(path, root)
    text = open(path, encoding="utf-8").read()
    for bad in ("../shared", "/work/"):
        if bad in text:
            problems.append("%s: refers to %s, outside the repository" % (rel, bad))
    for n, line in prose_lines(path):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:
            file_part, _, frag = target.partition("#")
            dest = path if not file_part else os.path.normpath(
                os.path.join(os.path.dirname(path), file_part))
            where = "%s:%d: link %s" % (rel, n, target)
            if not dest.startswith(root + os.sep) and dest != root:
                problems.append(where + " leaves the repository")
            elif not os.path.exists(dest):
                problems.append(where + " names no file")
            elif frag and dest.endswith(".md") and frag not in anchors(dest):
                problems.append(where + " names no heading of that page")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    docs = os.path.join(root, "docs")
    pages = sorted(os.path.join(docs, p) for p in os.listdir(docs) if p.endswith(".md"))
    problems = []
    for path in [os.path.join(root, "README.md")] + pages:
        check_page(root, path, problems)
    readme_lines = sum(1 for _ in open(os.path.join(root, "README.md"), encoding="utf-8"))
    if readme_lines > README_MAX_LINES:
        problems.append("README.md: %d lines, more than %d: move the detail into docs/"
                        % (readme_lines, README_MAX_LINES))
    toc = open(os.path.join(docs, "README.md"), encoding="utf-8").read()
    for path in pages:
        name = os.path.basename(path)
        if name != "README.md" and "(%s)" % name not in toc:
            problems.append("docs/README.md: the table of contents lacks %s" % name)
    for p in problems:
        print(p)
    print("check_docs: %d pages, %d problems" % (len(pages) + 1, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
