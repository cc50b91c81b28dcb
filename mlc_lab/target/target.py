"""Target: what to compile for, as a kind and its attributes.

    Target("llvm -num-cores=2")             # "--num-cores=2" is read the same
    Target("cuda -arch=sm_80", host="llvm")
    Target("nvidia/h100")                   # a tag: cuda with the H100's numbers
    Target({"kind": "llvm", "num-cores": 2})
    t.kind.name, t.attrs["num-cores"], t.num_cores, t.max_num_threads, t.host
    t.capabilities.gpu                      # what its backend's code can do

Every attribute is checked against the kind's table (``mlc_lab.target.kinds``) when the target is
made, so a misspelt option fails here, naming the options that exist. ``str(t)`` is canonical
(table order, defaults left out) and parses back to an equal target; targets are hashable.
"""
from __future__ import annotations

import shlex
from types import MappingProxyType

from .kinds import TargetKind, did_you_mean, get_kind
from .tags import TAGS

# Course-era TVM spellings of attributes, read as ours.
_PROPERTY_ALIASES = {"max_num_threads": "max-threads-per-block", "thread_warp_size": "warp-size"}
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


class Target:
    __slots__ = ("kind", "attrs", "host", "_key")

    def __init__(self, target, host=None):
        if isinstance(target, Target):
            kind, given, own_host = target.kind, dict(_explicit(target)), target.host
        elif isinstance(target, dict):
            kind, given, own_host = _from_dict(target)
        elif isinstance(target, str):
            kind, given, own_host = _from_string(target)
        else:
            raise TypeError(f"Target expects a string such as 'llvm', a dict or a Target, got "
                            f"{type(target).__name__}")
        if host is not None and own_host is not None and Target(host) != own_host:
            raise ValueError(f"target {target!r} names its host already; pass host= or -host, "
                             "not both")
        host = host if host is not None else own_host
        attrs = {name: attr.default for name, attr in kind.attrs.items()}
        for name, value in given.items():
            attrs[name] = _convert(kind, name, value)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "attrs", MappingProxyType(attrs))
        object.__setattr__(self, "host", None if host is None else Target(host))
        object.__setattr__(self, "_key", (kind.name, tuple(attrs.items()), self.host))

    def __setattr__(self, name, value):
        raise AttributeError("a Target is immutable; make a new one")

    def __getattr__(self, name: str):
        """``t.num_cores`` reads ``t.attrs["num-cores"]``; ``max_num_threads`` and
        ``thread_warp_size`` are the TVM names of max-threads-per-block and warp-size."""
        if name.startswith("_") or name in Target.__slots__:   # not set yet (copy, pickle)
            raise AttributeError(name)
        key = _PROPERTY_ALIASES.get(name, name.replace("_", "-"))
        if key in self.attrs:
            return self.attrs[key]
        raise AttributeError(f"target {self.kind.name!r} has no attribute {name!r}; its "
                             f"attributes: {', '.join(self.attrs) or 'none'}")

    @property
    def device_type(self) -> str:
        return self.kind.device_type

    @property
    def capabilities(self):
        """What code for this target can do: its backend's ``Capabilities`` (GPU or not, vector
        lanes, limits); code asks these instead of comparing kind names."""
        from .backend import get_backend
        return get_backend(self.kind.name).capabilities

    def __eq__(self, other) -> bool:
        return isinstance(other, Target) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __str__(self) -> str:
        words = [self.kind.name]
        for name, value in _explicit(self):
            if value is True:
                words.append(f"-{name}")
            else:
                words.append(f"-{name}={str(value).lower() if value is False else value}")
        if self.host is not None:
            words.append("-host=" + shlex.quote(str(self.host)))
        return " ".join(words)

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"

    def __reduce__(self):
        return Target, (str(self),)


def _explicit(target: Target):
    """(name, value) of the attributes that differ from the kind's defaults, in table order."""
    return [(name, value) for name, value in target.attrs.items()
            if value != target.kind.attrs[name].default]


def _from_string(text: str) -> tuple[TargetKind, dict, object]:
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise ValueError(f"target {text!r}: {err}") from None
    if not words:
        raise ValueError("the target string is empty; try 'llvm' or 'python'")
    head, given = words[0], {}
    if "/" in head:
        if head not in TAGS:
            raise ValueError(f"unknown target tag {head!r}{did_you_mean(head, TAGS)}; known tags: "
                             f"{', '.join(sorted(TAGS))}")
        given = {k: v for k, v in TAGS[head].items() if k != "kind"}
        head = TAGS[head]["kind"]
    kind = get_kind(head)
    host = None
    for word in words[1:]:
        if not word.startswith("-"):
            raise ValueError(f"target {text!r}: option {word!r} should look like -key=value")
        name, has_value, value = word.lstrip("-").partition("=")
        name = name.replace("_", "-")
        if name == "host":
            host = value
            continue
        given[name] = value if has_value else True
    return kind, given, host


def _from_dict(config: dict) -> tuple[TargetKind, dict, object]:
    if "kind" not in config:
        raise ValueError(f"a target dict needs a 'kind' entry, e.g. {{'kind': 'llvm'}}; got "
                         f"{config!r}")
    given = {str(k).replace("_", "-"): v for k, v in config.items() if k not in ("kind", "host")}
    return get_kind(config["kind"]), given, config.get("host")


def _convert(kind: TargetKind, name: str, value):
    """``value`` (from a string or a dict) as the attribute's type, or a ValueError saying what
    is wrong and what would be right."""
    if name not in kind.attrs:
        known = ", ".join(f"-{k}" for k in kind.attrs) or "none"
        raise ValueError(f"target {kind.name!r} has no option -{name}"
                         f"{did_you_mean(name, kind.attrs)}; known options: {known}")
    attr = kind.attrs[name]
    if value is None:
        return None
    if attr.type is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in _TRUE + _FALSE:
            return str(value).lower() in _TRUE
    elif attr.type is int:
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
        raise ValueError(f"target {kind.name!r}: -{name} must be a positive integer, got "
                         f"{value!r}")
    elif isinstance(value, str) and value:
        return value
    raise ValueError(f"target {kind.name!r}: -{name} expects a {attr.type.__name__}, got "
                     f"{value!r}")
