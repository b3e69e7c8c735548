#!/usr/bin/python3
"""What the agtrace executable asks of the dynamic loader (readelf -d, nm -D):

- no run path entry that is empty or relative: the loader reads an empty entry as the
  directory agtrace was started from, where any libstdc++.so.6 would be loaded;
- with --static-cxx-runtime, no libstdc++ or libgcc_s among the needed libraries;
- with --pool, the pool's operator new and delete in the dynamic symbol table, so that a
  library loaded later (the CUDA plugin) allocates through them.

    check_executable_links.py AGTRACE [--static-cxx-runtime] [--pool]
"""
import subprocess
import sys

def main():
    exe, flags = sys.argv[1], set(sys.argv[2:])
    dynamic = subprocess.run(["readelf", "-d", exe], check=True, capture_output=True, text=True).stdout
    problems = []
    for line in dynamic.splitlines():
        if "(RUNPATH)" in line or "(RPATH)" in line:
            path = line.split("[", 1)[1].rsplit("]", 1)[0]
            for entry in path.split(":"):
                if not entry.startswith("/") and not entry.startswith("$ORIGIN"):
                    problems.append(f"run path {path!r} has the entry {entry!r} (not absolute)")
    needed = [line.split("[", 1)[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line]
    if "--static-cxx-runtime" in flags:
        for lib in needed:
            if lib.startswith("libstdc++") or lib.startswith("libgcc_s"):
                problems.append(f"needs {lib} although the C++ runtime is linked in")
    if "--pool" in flags:
        symbols = subprocess.run(["nm", "-D", "--defined-only", exe], check=True, capture_output=True, text=True).stdout
        exported = {line.split()[-1] for line in symbols.splitlines() if line.strip()}
        for name in ["_Znwm", "_Znam", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm"]:
            if name not in exported:
                problems.append(f"operator new/delete symbol {name} is not exported")
    for p in problems:
        print(f"{exe}: {p}")
    print(f"needed: {', '.join(needed)}")
    return 1 if problems else 0

if __name__ == "__main__":
    sys.exit(main())
