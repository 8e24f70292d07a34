"""torch's `.pt2` reader, made quicker for the test suite; importing this module installs it.

torch 2.13's `torch._export.serde.serialize._dict_to_dataclass` asks `typing.get_type_hints`
of a schema dataclass for every node, argument and tensor description it reads, uncached: a
fifth of the suite's `.pt2` load time (about 1 ms a node on this machine). A class's hints
never change, so here they are computed once per (class, namespace) and reused. Nothing else
changes: the programs read are the ones `torch.export.load` gives without it.
"""
import types
import typing

from torch._export.serde import serialize

_HINTS = {}


def _cached_type_hints(obj, globalns=None, localns=None, include_extras=False):
    key = (obj, id(globalns), id(localns), include_extras)
    hints = _HINTS.get(key)
    if hints is None:
        hints = typing.get_type_hints(obj, globalns=globalns, localns=localns, include_extras=include_extras)
        # the namespace is the schema module's own dict, alive for the process: its id stays its own
        _HINTS[key] = hints
    return hints


def _install():
    if getattr(serialize.typing, "_hfexport_cached", False):
        return
    cached = types.ModuleType("typing")
    cached.__dict__.update(vars(typing))
    cached.get_type_hints = _cached_type_hints
    cached._hfexport_cached = True
    serialize.typing = cached


_install()
