"""FNV-1a over a tensor's bytes (row-major, its own dtype): how the reference scripts beside
this file hand torch's results to the C++ tests, which hash agtrace's the same way."""

FNV_OFFSET, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


def fnv(t):
    h = FNV_OFFSET
    for byte in t.contiguous().numpy().tobytes():
        h = ((h ^ byte) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h
