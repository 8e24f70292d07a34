"""The default progress of :func:`hfexport.export`: a tqdm bar over the weights as they stream
(then one per verified component) when tqdm is installed, plain lines on stderr otherwise, as
the command line prints them in a log."""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Dict, Iterator, Optional

Event = Dict[str, Any]


@contextlib.contextmanager
def default_progress() -> Iterator[Callable[[Event], None]]:
    try:
        from tqdm.auto import tqdm
    except ImportError:
        tqdm = None
    if tqdm is None:
        yield _lines
        return
    bars = _Bars(tqdm)
    try:
        yield bars
    finally:
        bars.close()


def _lines(event: Event) -> None:
    """Notes, and every 16th weight (and the last), as the command line prints them to a log."""
    kind = event["event"]
    if kind == "note":
        print(event["message"], file=sys.stderr)
    elif kind == "weight" and (event["done"] % 16 == 1 or event["done"] == event["total"]):
        print(f"weights {event['done']}/{event['total']}: {event['tensor']}", file=sys.stderr)


class _Bars:
    """One tqdm bar at a time: the weights', then each verified component's."""

    def __init__(self, tqdm: Any) -> None:
        self.tqdm = tqdm
        self.bar: Optional[Any] = None

    def __call__(self, event: Event) -> None:
        kind = event["event"]
        if kind == "note":
            self.tqdm.write(event["message"], file=sys.stderr)
        elif kind == "weight":
            if self.bar is None:
                self.bar = self.tqdm(total=event["total"], desc="weights", unit="tensor", file=sys.stderr)
            self.bar.n = event["done"]
            self.bar.set_postfix_str(f"{event['bytes'] / 1e6:.1f} MB {event['tensor']}", refresh=True)
        elif kind == "weights_written":
            self.close()
        elif kind == "verify":
            if event["done"] == event["total"]:
                self.close()
                return
            if self.bar is None:
                self.bar = self.tqdm(total=event["total"], desc=f"verify {event['component']}", unit="input", file=sys.stderr)
            self.bar.n = event["done"]
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
