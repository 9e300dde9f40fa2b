"""Keeps the GIL across the calls pyshim marks //streambridge:keepgil.

gopy's generated Go releases the GIL around every call (PyEval_SaveThread, then
PyEval_RestoreThread): two more crossings from Go into C, which cost more than a
cuStreamQuery. For calls that never block, never call back into Python and take
nanoseconds, this removes the release and re-take from the generated function.

    python3 scripts/gopy-keep-gil.py GENERATED.go PKG_DIR
"""

import glob
import re
import sys

generated, pkg = sys.argv[1], sys.argv[2]
marked = set()
for path in glob.glob(f"{pkg}/*.go"):
    marked |= set(re.findall(r"^//streambridge:keepgil\nfunc (\w+)\(", open(path).read(), re.M))
src = open(generated).read()
for name in sorted(marked):
    head = re.search(rf"^func pyshim_{name}\(.*\{{\n", src, re.M)
    if not head:
        sys.exit(f"keep-gil: no generated function for {name}")
    end = src.index("\n}\n", head.end())
    body = src[head.end():end]
    kept = re.sub(r"^\t(_saved_thread := C\.PyEval_SaveThread\(\)|(defer )?C\.PyEval_RestoreThread\(_saved_thread\))\n",
                  "", body, flags=re.M)
    if body.count("PyEval_") != 2 or "PyEval_" in kept:
        sys.exit(f"keep-gil: unexpected generated code for {name}")
    src = src[:head.end()] + kept + src[end:]
open(generated, "w").write(src)
print(f"keep-gil: {len(marked)} calls keep the GIL: {', '.join(sorted(marked))}")
