#!/usr/bin/env python3
"""Validate the heldout2 retrieval evaluation set (kb/ files and questions.tsv)."""
import os
import re
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
LANGS = ("en", "pt", "es")
KBS = (1, 3, 20)
errors = []


def err(msg):
    errors.append(msg)


# ---- knowledge base files ----
docs = {}
for lang in LANGS:
    docs[lang] = []
    for i in range(1, 21):
        path = os.path.join(HERE, "kb", lang, "%02d.txt" % i)
        if not os.path.isfile(path):
            err("missing %s" % path)
            docs[lang].append("")
            continue
        raw = open(path, "rb").read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            err("%s: not UTF-8" % path)
            text = raw.decode("utf-8", "replace")
        if "\r" in text:
            err("%s: contains CR" % path)
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines = lines[:-1]
        if len(lines) != 2:
            err("%s: %d lines (want 2)" % (path, len(lines)))
        else:
            title, para = lines
            if not title.strip() or title != title.strip():
                err("%s: empty title or stray whitespace" % path)
            if title.endswith("."):
                err("%s: title ends with a period" % path)
            if not para.strip():
                err("%s: empty paragraph" % path)
            # rough sentence count (ignores abbreviations like a.m., Dr., Dra.)
            p = re.sub(r"\b(a\.m|p\.m|Dr|Dra)\.", "X", para)
            n = len(re.findall(r"[.!?](\s|$)", p))
            if not 2 <= n <= 6:
                err("%s: ~%d sentences (want 2-6)" % (path, n))
        docs[lang].append(text)

# ---- questions ----
qpath = os.path.join(HERE, "questions.tsv")
rows = open(qpath, encoding="utf-8").read().split("\n")
if rows and rows[-1] == "":
    rows = rows[:-1]
if rows[0] != "language\tkb\tquestion\texpected":
    err("bad header: %r" % rows[0])
counts = Counter()
seen = set()
for ln, line in enumerate(rows[1:], 2):
    f = line.split("\t")
    if len(f) != 4:
        err("line %d: %d fields (tab inside a field?)" % (ln, len(f)))
        continue
    lang, kb, q, exp = f
    if lang not in LANGS:
        err("line %d: bad language %r" % (ln, lang))
        continue
    if kb not in ("1", "3", "20"):
        err("line %d: bad kb %r" % (ln, kb))
        continue
    kb = int(kb)
    if not q.strip() or q != q.strip():
        err("line %d: empty question or stray whitespace" % ln)
    if (lang, kb, q) in seen:
        err("line %d: duplicate question" % ln)
    seen.add((lang, kb, q))
    ans = exp != "-"
    counts[(lang, kb, ans)] += 1
    if not ans:
        continue
    nw = len(exp.split())
    if not 3 <= nw <= 8:
        err("line %d: expected has %d words (want 3-8): %r" % (ln, nw, exp))
    full = "\n".join(docs[lang])
    occ = full.count(exp)
    if occ != 1:
        err("line %d: expected occurs %d times in %s docs: %r" % (ln, occ, lang, exp))
        continue
    where = [i + 1 for i, d in enumerate(docs[lang]) if exp in d]
    if len(where) != 1 or where[0] > kb:
        err("line %d: expected found in doc %s, outside 01..%02d: %r" % (ln, where, kb, exp))

total = sum(counts.values())
print("questions: %d" % total)
print("lang kb  answerable unanswerable")
for lang in LANGS:
    for kb in KBS:
        a, u = counts[(lang, kb, True)], counts[(lang, kb, False)]
        print("%-4s %-3d %10d %12d" % (lang, kb, a, u))
        if (a, u) != (14, 6):
            err("%s kb=%d: %d answerable / %d unanswerable (want 14/6)" % (lang, kb, a, u))
if total != 180:
    err("total questions %d (want 180)" % total)

if errors:
    print("\nFAIL (%d problems)" % len(errors))
    for e in errors:
        print("  " + e)
    sys.exit(1)
print("\nOK")
