"""Which `.pt2` programs to retrace, shared by run_pt2.py and generate_pt2.py.

`ep.run_decompositions()` + `torch.export.save` + `torch.export.load` retraces a program: it
fails on an operator or a shape guard, never on a weight value or a layer count, and it is most
of the torch scripts' time (seconds to tens of seconds a program). So each script retraces a
program only when it brings something no program retraced before in this process had: an
operator, or a signature of symbolic input shapes (a constant axis, a head count or a layer's
head dim, is `#`; the number of inputs does not count). Every operator and every input
signature of the suite is retraced at least once, by the first program that has it; counting
every distinct set of them as its own kind instead retraced 69 of 100 programs.

Where `HFEXPORT_PT2_COVERAGE` names a file, the coverage is the one of every process that shares
that file (the forward and generation scripts a test binary runs side by side): a program is
retraced by the first process to bring what it brings, under an exclusive lock on the file, and
the others count it as retraced. Each retrace takes seconds, and the forward and the generation
programs share most of their operators."""
import fcntl
import json
import os
import zipfile


def program_parts(path, name, inputs):
    """The operators of program `name` of the archive `path` and the symbolic signatures of
    its inputs, which export.json lists."""
    with zipfile.ZipFile(path) as z:
        (program,) = [e for e in z.namelist() if e.endswith(f"/models/{name}.json")]
        nodes = json.loads(z.read(program))["graph_module"]["graph"]["nodes"]
    ops = {n["target"] for n in nodes}
    shapes = {json.dumps(["#" if d.isdigit() else d for d in p["shape"]]) for p in inputs}
    return ops, shapes


class Coverage:
    """The operators and input signatures the programs retraced so far had (in this process, or
    in every process sharing the file `HFEXPORT_PT2_COVERAGE` names)."""

    def __init__(self):
        self.ops, self.shapes = set(), set()
        self.shared = os.environ.get("HFEXPORT_PT2_COVERAGE")

    def needs_retrace(self, path, name, inputs):
        """Whether program `name` of `path` has an operator or input signature not yet
        retraced; if so it counts as retraced from now on (the caller retraces it)."""
        ops, shapes = program_parts(path, name, inputs)
        if not self.shared:
            return self._claim(ops, shapes)
        with open(self.shared, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            seen = json.loads(f.read() or '{"ops": [], "shapes": []}')
            self.ops, self.shapes = set(seen["ops"]), set(seen["shapes"])
            new = self._claim(ops, shapes)
            if new:
                f.seek(0)
                f.truncate()
                f.write(json.dumps({"ops": sorted(self.ops), "shapes": sorted(self.shapes)}))
            return new

    def _claim(self, ops, shapes):
        if ops <= self.ops and shapes <= self.shapes:
            return False
        self.ops |= ops
        self.shapes |= shapes
        return True
