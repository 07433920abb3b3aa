#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Installs the workspace build to a temporary directory and checks what
an install is:

1. Relocatable: every installed executable and preload object, and every
   installed library that needs another mimprof library, has a RUNPATH
   made of $ORIGIN-relative entries only.
2. Exports: every name `nm -D --defined-only` lists for an installed
   shared library is declared in the public headers of its package (or is
   a linker-made section bound). The preload objects and the allocator's
   override have no header of their own: their interface is the malloc
   family of <mimprof/sys-override.inc.h>, and for the preload objects
   also what the runtime interposes: _exit and _Exit, to take a last
   report (cli/runtime/rt_fatal.c); sigaction and the signal()
   family, to show the program its own dispositions (rt_signals.c); and
   socketpair, to keep libcurl's pairs out of the program's descriptor
   range (rt_fds.c).
3. Runs: the installed `mimprof run` profiles a real program (sort) in a
   clean environment (env -i, no LD_LIBRARY_PATH) and writes its report.

Usage: check_install.py WORKSPACE_SOURCE_ROOT BUILD_DIR
"""
import gzip
import os
import re
import subprocess
import sys
import tempfile

SRC, BUILD = sys.argv[1], sys.argv[2]

# library name prefix -> the headers that declare its exports
HEADERS = {
    "libmimprof-sys": ["sys/include/mimprof"],
    "libmimprof-allocator-override": ["sys/include/mimprof/sys-override.inc.h"],
    # the override's filtee, in <libdir>/mimprof/ (nobody preloads it by mistake)
    "libmimprof-internal-override-glibc": ["sys/include/mimprof/sys-override.inc.h"],
    "libmimprof-allocator": ["allocator/include/mimprof"],
    "libmimprof-image": ["image/include/mimprof"],
    "libmimprof-profiling": ["profiling/include/mimprof"],
    "libmimprof-pyroscope": ["pyroscope-adapter/include/mimprof"],
    "libmimprof-preload-": ["sys/include/mimprof/sys-override.inc.h"],
}
INTERPOSED = {"_exit", "_Exit",                                       # last report
              "sigaction", "signal", "bsd_signal", "sysv_signal", "sigset",  # dispositions
              "socketpair"}                                           # libcurl's pairs
LINKER_NAMES = {"_init", "_fini", "_edata", "_end", "__bss_start"}
SECTION_BOUND = re.compile(r"^__(start|stop)_[A-Za-z0-9_]+$")

problems = []


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def declared_names(paths):
    names = set()
    for p in paths:
        full = os.path.join(SRC, p)
        files = [full] if os.path.isfile(full) else [
            os.path.join(full, f) for f in sorted(os.listdir(full)) if f.endswith(".h")]
        for f in files:
            names.update(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b",
                                    strip_comments(open(f, encoding="utf-8").read())))
    return names


def headers_for(lib):
    # the longest matching prefix (libmimprof-allocator-override before -allocator)
    for prefix in sorted(HEADERS, key=len, reverse=True):
        if lib.startswith(prefix):
            return prefix, HEADERS[prefix]
    return None, None


def elf_dynamic(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    m = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[([^\]]*)\]", out)
    return needed, (m.group(1).split(":") if m else [])


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def main():
    dest = tempfile.mkdtemp(prefix="mimprof-install-")
    r = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet",
                        "--destdir", dest], capture_output=True, text=True)
    if r.returncode != 0:
        print("meson install failed:\n" + r.stdout + r.stderr)
        return 1
    exes, libs = [], []
    for d, _, files in os.walk(dest):
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p) or not is_elf(p):
                continue
            (libs if ".so" in f else exes).append(p)
    if not exes or not libs:
        problems.append(f"nothing installed? {len(exes)} executables, {len(libs)} libraries")

    # 1. RUNPATH
    for p in exes + libs:
        name = os.path.basename(p)
        needed, runpath = elf_dynamic(p)
        must = p in exes or name.startswith("libmimprof-preload-") or \
            any(n.startswith("libmimprof-") for n in needed)
        if must and not runpath:
            problems.append(f"{os.path.relpath(p, dest)}: no RUNPATH")
        for entry in runpath:
            if not entry.startswith("$ORIGIN"):
                problems.append(f"{os.path.relpath(p, dest)}: RUNPATH entry {entry!r} is not "
                                "relative to $ORIGIN")

    # 2. exports
    for p in libs:
        name = os.path.basename(p)
        prefix, hdrs = headers_for(name)
        if prefix is None:
            problems.append(f"{name}: installed library of no known package")
            continue
        allowed = declared_names(hdrs) | LINKER_NAMES
        if prefix == "libmimprof-preload-":
            allowed |= INTERPOSED
        out = subprocess.run(["nm", "-D", "--defined-only", p], capture_output=True,
                             text=True, check=True).stdout
        exported = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
        extra = sorted(s for s in exported if s not in allowed and not SECTION_BOUND.match(s)
                       and not s.startswith("MIMPROF_"))  # version-script node names
        if extra:
            problems.append(f"{name} exports {len(extra)} names its headers do not declare: "
                            + ", ".join(extra[:20]) + (" ..." if len(extra) > 20 else ""))
        else:
            print(f"ok: {name}: {len(exported)} exported names, all declared")

    # 3. the installed command on a real program, clean environment
    mimprof = [p for p in exes if os.path.basename(p) == "mimprof"]
    if not mimprof:
        problems.append("no installed mimprof")
    else:
        work = tempfile.mkdtemp(prefix="mimprof-install-run-")
        data = os.path.join(work, "in.txt")
        lines = [f"{(i * 7919) % 100003:06d} line" for i in range(20000)]
        with open(data, "w") as f:
            f.write("\n".join(lines) + "\n")
        out_dir = os.path.join(work, "out")
        r = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", mimprof[0], "run", "-o", out_dir,
                            "--", "/usr/bin/sort", data],
                           capture_output=True, text=True, cwd=work, timeout=120)
        if r.returncode != 0:
            problems.append(f"installed mimprof run failed ({r.returncode}): {r.stderr.strip()}")
        elif r.stdout.splitlines() != sorted(lines):
            problems.append("sort's output under the installed mimprof run is not sorted input")
        else:
            reports = sorted(f for f in os.listdir(out_dir) if f.endswith(".pb.gz"))
            if not reports:
                problems.append("installed mimprof run wrote no report")
            elif not gzip.open(os.path.join(out_dir, reports[-1])).read():
                problems.append(f"{reports[-1]} is empty")
            else:
                print(f"ok: installed mimprof run -- sort: {len(reports)} report(s), "
                      f"{mimprof[0][len(dest):]}")
        subprocess.run(["rm", "-rf", work])
    subprocess.run(["rm", "-rf", dest])

    for p in problems:
        print("FAILED: " + p)
    return 1 if problems else 0


sys.exit(main())
