"""Text in a social post that is not words: addresses, handles, hashtags, emoji shortcodes.

A translator that translates a link's displayed address breaks it ("hotels.com" becomes
"hoteller.com", Mastodon issue #21859), and one that translates a ``@handle`` or a custom
emoji's ``:shortcode:`` breaks those. Mastodon marks its mentions and links
``translate="no"``; these rules recognise the same things where a post does not say so.
``html`` keeps a link whose text is its own address verbatim, like ``translate="no"``
content; ``has_words`` (which decides what is sent to the model at all) does not count them
as words, so a text run that is only an address, a handle or shortcodes costs no engine
request. Hashtags are words in a sentence (Mastodon leaves them translatable): only a run
that is nothing but a hashtag, cut from its sentence, is not sent on its own.
"""

from __future__ import annotations

import re

# A URL with a scheme, or a host name (ASCII labels and a dot, a top-level domain of lower-case
# letters: "3.5", "e.g.", "a.m." and "soon.Bye" are not hosts), then an optional port and
# path: "news.example/en".
_ADDRESS = re.compile(
    r"[a-z][a-z0-9+.-]*://\S+"
    r"|(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?-i:[a-z]{2,63})(?::\d{1,5})?(?:[/?#]\S*)?",
    re.IGNORECASE,
)
# "@alice", "@alice@social.example" (Mastodon's handles), "bob@example.com".
_HANDLE = re.compile(r"[\w.+-]*@\w[\w.-]*(?:@[\w-]+(?:\.[\w-]+)+)?")
# Mastodon's custom emoji shortcodes, one or more: ":blobcat:", ":blobcat::flag_fr:".
_SHORTCODES = re.compile(r"(?::[A-Za-z0-9_]{2,}:)+")
_HASHTAG = re.compile(r"#[^\W_]\w*")
_NOT_WORDS = (_ADDRESS, _HANDLE, _SHORTCODES)
_ATOMS = (*_NOT_WORDS, _HASHTAG)
_SPACES = re.compile(r"(\s+)")
# Punctuation around a token that does not change what it is: "(hotels.com)," "@alice:".
_AROUND = "\"'()[]{}<>.,;:!?«»“”‘’…"
_AROUND_BUT_COLON = _AROUND.replace(":", "")


def is_address(text: str) -> bool:
    """Whether ``text`` (one token, no spaces) is a URL or a bare host name with a path."""
    return _ADDRESS.fullmatch(text) is not None


def is_atom(token: str, hashtags: bool = True) -> bool:
    """Whether a whitespace-separated token is an address, a handle, custom emoji shortcodes
    or (``hashtags``) a hashtag, punctuation around it aside, rather than a word."""
    patterns = _ATOMS if hashtags else _NOT_WORDS
    for core in (token, token.strip(_AROUND), token.strip(_AROUND_BUT_COLON)):
        if core and any(p.fullmatch(core) for p in patterns):
            return True
    return False


def edges(text: str) -> tuple[str, str, str]:
    """``text`` (stripped) as the addresses, handles and shortcodes it starts with, the rest,
    and those it ends with: the structural method sends the middle alone. Hashtags stay in
    the middle: they are words of the sentence."""
    parts = _SPACES.split(text)  # tokens at even positions, spaces between
    i, j = 0, len(parts)
    while i < j and is_atom(parts[i], hashtags=False):
        i += 2
    while j > i and is_atom(parts[j - 1], hashtags=False):
        j -= 2
    return "".join(parts[:i]), "".join(parts[i:j]), "".join(parts[j:])


def has_words(text: str) -> bool:
    """Whether ``text`` holds anything to translate: a token with a letter that is not an
    atom (``is_atom``)."""
    if not any(c.isalpha() for c in text):
        return False
    return any(any(c.isalpha() for c in tok) and not is_atom(tok) for tok in text.split())


def shows_address(text: str, href: str) -> bool:
    """Whether a link's text (its spans joined) is an address rather than words: a URL or a
    bare host and path, part of its own ``href`` (shortened for display), or a ``@handle``.
    Never a hashtag: those are words of their sentence."""
    text = text.strip()
    if not text or text.startswith("#") or any(c.isspace() for c in text):
        return False
    if text.startswith("@") or is_address(text):
        return True
    shown = without_scheme(text).rstrip("…")
    return any(c in shown for c in "./") and shown in without_scheme(href)


def without_scheme(url: str) -> str:
    """``url`` lower-cased, without its scheme, ``www.`` and a trailing slash."""
    url = url.strip().lower()
    if "://" in url:
        url = url.split("://", 1)[1]
    return url.removeprefix("www.").rstrip("/")
