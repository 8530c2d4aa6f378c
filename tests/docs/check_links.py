#!/usr/bin/env python3
"""Checks the links of README.md and docs/*.md: every relative link names a
file or folder of the repository that exists, and every #anchor a heading
(or an explicit id) of the page it points into, as GitHub renders them.
Links out of the repository and web links are not followed (the tests have
no network); a link that climbs out of the repository is an error.

  check_links.py --root DIR PAGE...
"""
import argparse
import os
import re
import sys
import unicodedata

INLINE = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[([^\]]+)\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)
IDS = re.compile(r"""<[a-z]+\b[^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text):
    """Yields (line number, line) outside fenced code, inline code blanked."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip()[len(m.group(1)):].strip():
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield n, re.sub(r"(`+)(.+?)\1", lambda c: " " * len(c.group(0)), line)


def slug(title):
    """GitHub's anchor for a heading."""
    title = re.sub(r"<[^>]+>", "", title)                      # inline HTML
    title = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", title)   # links keep their text
    title = title.replace("`", "")
    out = []
    for ch in title.lower():
        if ch in " -":
            out.append("-")
        elif ch == "_" or ch.isalnum() or unicodedata.category(ch).startswith("M"):
            out.append(ch)
    return "".join(out)


def anchors(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        text = open(path, encoding="utf-8").read()
        fence = None
        for line in text.split("\n"):
            m = FENCE.match(line)
            if fence:
                if m and m.group(1)[0] == fence[0]:
                    fence = None
                continue
            if m:
                fence = m.group(1)
                continue
            h = HEADING.match(line)
            if h:
                base = slug(h.group(2))
                k = seen.get(base, 0)
                seen[base] = k + 1
                found.add(base if k == 0 else f"{base}-{k}")
            found.update(IDS.findall(line))
        cache[path] = found
    return cache[path]


def check(root, page):
    errors = []
    rel = os.path.relpath(page, root)
    text = open(page, encoding="utf-8").read()
    for n, line in prose_lines(text):
        targets = [m.group(3) for m in INLINE.finditer(line)]
        targets += HTML.findall(line)
        d = REFDEF.match(line)
        if d:
            targets.append(d.group(2))
        for target in targets:
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):   # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            if path:
                resolved = os.path.normpath(os.path.join(os.path.dirname(page), path))
                if os.path.relpath(resolved, root).startswith(".."):
                    errors.append(f"{rel}:{n}: error: link '{target}' leaves the repository")
                    continue
                if not os.path.exists(resolved):
                    errors.append(f"{rel}:{n}: error: link '{target}': {os.path.relpath(resolved, root)} does not exist")
                    continue
            else:
                resolved = page
            if anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                errors.append(f"{rel}:{n}: error: link '{target}': no heading or id '#{anchor}' in "
                              f"{os.path.relpath(resolved, root)}")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("pages", nargs="+")
    args = ap.parse_args()
    errors = []
    for page in args.pages:
        errors += check(args.root, page)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        print(f"check_links: {len(errors)} broken links", file=sys.stderr)
        return 1
    print(f"check_links: {len(args.pages)} pages, every relative link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
