"""Six fixes to gopy v0.5.0's generated code, applied after `gopy build` generates it.
Each one checks that it found the code it expects and stops the build if not, so a new
gopy whose output changed fails here, loudly, rather than building something else.

1. Keeps the GIL across the calls pyshim marks //streambridge:keepgil. gopy's generated Go
   releases the GIL around every call (PyEval_SaveThread, then PyEval_RestoreThread): two
   more crossings from Go into C, which cost more than a cuStreamQuery. For calls that never
   block, never call back into Python and take nanoseconds, the release and re-take go.

2. Frees the C string a Go function returning only `error` hands back. gopy returns
   C.CString("") (or the error text) from it, and its C wrapper never frees that: 32 bytes
   lost a call (bench/memory.py found it). Functions returning a string already free theirs.
   This matters for Go packages of users' own built into the module (examples/gokernels).

3. Raises a Go error as the typed exception of its kind. gopy raises every error as
   RuntimeError(err.Error()); its generated error path is routed to sbRaise (written here
   into the generated package), which classifies the error (bridge.DescribeForPython) and
   hands (kind, code, name, message, log) to the C core's sb_raise (python/native/core.c).
   Nothing on the Python side parses a message.

4. Gives each package's Python module a __dir__ that names what the Go package exports, not
   the modules and paths gopy's loader leaves at its top (os, sys, inspect, cwd, go...).

5. Declares the module free of the GIL on a free-threaded CPython (PyUnstable_Module_SetGIL,
   Py_MOD_GIL_NOT_USED), so that importing it leaves the GIL off: its wrappers only convert
   arguments, the Go side guards its own state, and the C core holds its own lock where it
   relied on the GIL (python/native/gate.inc, "The core lock"). On other builds, nothing.

6. Leaves the process's working directory alone. gopy's loader (go.py, each package's module)
   changes it to the package's folder for the import and back (os.getcwd, os.chdir): another
   thread's relative paths meanwhile go there, an import that fails leaves it changed, and
   from a directory since removed the import fails. The import is package-relative
   (`from . import _sbnative`), so nothing needs the change.

    python3 scripts/gopy-fixups.py GENERATED_DIR PKG_DIR
"""

import glob
import re
import sys

gen, pkg = sys.argv[1], sys.argv[2]
go_file, c_file = f"{gen}/sbnative.go", f"{gen}/sbnative.c"

marked = set()
for path in glob.glob(f"{pkg}/*.go"):
    marked |= set(re.findall(r"^//streambridge:keepgil\nfunc (\w+)\(", open(path).read(), re.M))
src = open(go_file).read()
for name in sorted(marked):
    head = re.search(rf"^func pyshim_{name}\(.*\{{\n", src, re.M)
    if not head:
        sys.exit(f"gopy-fixups: no generated function for {name}")
    end = src.index("\n}\n", head.end())
    body = src[head.end():end]
    kept = re.sub(r"^\t(_saved_thread := C\.PyEval_SaveThread\(\)|(defer )?C\.PyEval_RestoreThread\(_saved_thread\))\n",
                  "", body, flags=re.M)
    if body.count("PyEval_") != 2 or "PyEval_" in kept:
        sys.exit(f"gopy-fixups: unexpected generated code for {name}")
    src = src[:head.end()] + kept + src[end:]

# Errors: gopy's one shape of raising a returned error, in every generated function.
raise_line = "\t\tC.PyErr_SetString(C.PyExc_RuntimeError, estr)\n"
shape = "\t\testr := C.CString(__err.Error())\n" + raise_line
errors = src.count("if __err != nil {")
if errors == 0 or src.count(shape) != errors or src.count(raise_line) != errors:
    sys.exit(f"gopy-fixups: gopy's error path changed ({errors} error checks, {src.count(shape)} raises of the known shape)")
src = src.replace(shape, "\t\testr := C.CString(__err.Error())\n\t\tsbRaise(__err)\n")
open(go_file, "w").write(src)
open(f"{gen}/sbraise.go", "w").write('''// Written by scripts/gopy-fixups.py: gopy's generated error path raises through here.

package main

// #include <stdlib.h>
// extern void sb_raise(int kind, long long code, char *name, char *message, char *log);
import "C"

import (
	"unsafe"

	"github.com/streambridge/streambridge/bridge"
)

// sbRaise sets the Python exception for err: the typed one of its kind (python/native/core.c).
func sbRaise(err error) {
	d := bridge.DescribeForPython(err)
	name, message, log := C.CString(d.Name), C.CString(err.Error()), C.CString(d.Log)
	C.sb_raise(C.int(d.Kind), C.longlong(d.Code), name, message, log)
	C.free(unsafe.Pointer(name))
	C.free(unsafe.Pointer(message))
	C.free(unsafe.Pointer(log))
}
''')

# The C wrappers of error-only functions: the one shape of a char* result with no free.
leaky = re.compile(r"(    retval = (\w+)\(.*\);\n    if \(PyErr_Occurred\(\)\) \{\n)(        return NULL;\n    \}\n"
                   r"    py_retval = Py_BuildValue\(\(char \*\) \"s\", retval\);\n)(    return py_retval;\n)")
c_src = open(c_file).read()
freed = [m.group(2) for m in leaky.finditer(c_src)]
error_only = src.count("\tvar __err error\n\t__err = ")  # the Go side of each error-only function
if len(freed) != error_only:
    sys.exit(f"gopy-fixups: gopy's error-only functions changed ({error_only} in Go, {len(freed)} C wrappers of "
             "the known shape)")
c_src = leaky.sub(lambda m: m.group(1) + "        free(retval);\n" + m.group(3) + "    free(retval);\n" + m.group(4), c_src)
create = "    m = PyModule_Create(&_sbnative_moduledef);\n"
if c_src.count(create) != 1:
    sys.exit("gopy-fixups: gopy's module init changed (no one PyModule_Create of _sbnative_moduledef)")
c_src = c_src.replace(create, create + """    #ifdef Py_GIL_DISABLED
    if (m != NULL && PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED) < 0) {
        Py_DECREF(m);
        return MOD_ERROR;
    }
    #endif
""")
open(c_file, "w").write(c_src)
# Each package module: what its loader defined is noted where the Go package's part begins.
DIR_FN = """

def __dir__():
    \"\"\"What the Go package exports (written by scripts/gopy-fixups.py).\"\"\"
    return sorted(n for n in globals() if n not in _gopy_loader_names and not n.startswith("_"))
"""
loader_end = "\n# ---- Types ---\n"
packages = [p for p in sorted(glob.glob(f"{gen}/*.py")) if p.rsplit("/", 1)[1] not in ("__init__.py", "build.py", "go.py")]
for path in packages:
    py = open(path).read()
    if py.count(loader_end) != 1:
        sys.exit(f"gopy-fixups: gopy's package module {path} changed (no one '# ---- Types ---' line)")
    py = py.replace(loader_end, "\n_gopy_loader_names = set(globals()) | {'_gopy_loader_names'}  # gopy-fixups: see __dir__" +
                    loader_end)
    py += DIR_FN
    open(path, "w").write(py)
# The loader's changes of the working directory, in every generated Python module that has them.
CHDIRS = ("cwd = os.getcwd()\n", "os.chdir(currentdir)\n", "os.chdir(cwd)\n")
loaders = []
for path in sorted(glob.glob(f"{gen}/*.py")):
    py = open(path).read()
    found = [py.count(line) for line in CHDIRS]
    if found == [0, 0, 0]:
        continue
    if found != [1, 1, 1] or "from . import _sbnative\n" not in py:
        sys.exit(f"gopy-fixups: gopy's loader in {path} changed (its os.chdir lines: {found})")
    for line in CHDIRS:
        py = py.replace(line, "")
    open(path, "w").write(py)
    loaders.append(path.rsplit("/", 1)[1])
if "go.py" not in loaders:
    sys.exit("gopy-fixups: gopy's loader changed (go.py has no os.chdir lines)")
print(f"gopy-fixups: {len(marked)} calls keep the GIL: {', '.join(sorted(marked))}")
print(f"gopy-fixups: {len(freed)} error-only calls free their result: {', '.join(freed) or '-'}")
print(f"gopy-fixups: {errors} error paths raise the typed exception of their kind")
print(f"gopy-fixups: {len(packages)} package modules name only their Go exports in dir()")
print("gopy-fixups: the module declares it needs no GIL (free-threaded builds)")
print(f"gopy-fixups: {len(loaders)} loaders leave the working directory alone: {', '.join(loaders)}")
