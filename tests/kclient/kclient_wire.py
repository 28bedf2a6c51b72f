"""The kernel-client wire format (bpf_ops/kclient_abi.h) in Python, for the tests:
datagrams built with struct, independent of the C++ code under test."""

import ctypes
import os
import socket
import struct
import time

MAGIC = 0x434B3351
VERSION = 1
GENERATE, POLL, CANCEL, ANSWER = 1, 2, 3, 4
F_TEXT, F_APPEND = 1, 2
UNSET = 0xFFFFFFFF
HDR = struct.Struct("<IHBBII32s")             # qk_hdr, 48 bytes
GEN_FIXED = struct.Struct("<HHI IIIIII Q")     # max_tokens, prompt_len, reserved, qk_sampling
ANSWER_HEAD = struct.Struct("<BBHIIIIIII")     # status .. tokens (32 bytes after the header)
TOKEN = struct.Struct("<iIHBB20s")             # qk_token, 32 bytes
ANSWER_TOKENS = 8
ANSWER_SIZE = HDR.size + ANSWER_HEAD.size + ANSWER_TOKENS * TOKEN.size
FINISH = {0: "running", 1: "length", 2: "eos", 3: "stop", 4: "cancelled", 5: "error"}
assert HDR.size == 48 and GEN_FIXED.size == 40 and ANSWER_SIZE == 336


def enter_private_netns():
    """Moves this process into a new network namespace with its own loopback up:
    the test's datagrams and XDP program never touch the host's interfaces."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x40000000) != 0:  # CLONE_NEWNET
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")
    if os.system("ip link set lo up") != 0:
        raise RuntimeError("ip link set lo up failed")


def header(kind, request_id, session, flags=0, from_index=0):
    return HDR.pack(MAGIC, VERSION, kind, flags, request_id, from_index, session.encode())


def generate(request_id, session, prompt, max_tokens=8, text=True, append=True, temperature=0.0, seed=None):
    """A QK_GENERATE datagram; `prompt` is a str (text) or a list of ids."""
    body = prompt.encode() if text else struct.pack(f"<{len(prompt)}i", *prompt)
    flags = (F_TEXT if text else 0) | (F_APPEND if append else 0)
    temp = UNSET if temperature is None else int(round(temperature * 65536))
    sampling = (temp, UNSET, UNSET, UNSET, UNSET, 1 if seed is not None else 0, seed or 0)
    fixed = GEN_FIXED.pack(max_tokens, len(prompt), 0, *sampling)
    return header(GENERATE, request_id, session, flags) + fixed + body


def poll_datagram(request_id, session, from_index):
    return header(POLL, request_id, session, 0, from_index).ljust(ANSWER_SIZE, b"\0")


def parse_answer(data):
    magic, version, kind, _flags, request_id, from_index, session = HDR.unpack_from(data)
    status, count, _r, finish, error, produced, positions, prompt_tokens, cached_tokens, tokens = \
        ANSWER_HEAD.unpack_from(data, HDR.size)
    entries = []
    for i in range(count):
        tid, seq, index, text_len, flags, text = TOKEN.unpack_from(data, HDR.size + ANSWER_HEAD.size + i * TOKEN.size)
        entries.append(dict(id=tid, seq=seq, index=index, flags=flags, text=text[:text_len]))
    return dict(magic=magic, kind=kind, request_id=request_id, from_index=from_index, status=status,
                finish=finish, error=error, produced=produced, positions=positions, prompt_tokens=prompt_tokens,
                cached_tokens=cached_tokens, tokens=tokens, entries=entries)


class Client:
    """One UDP socket to the endpoint, bound to `source` (an address in 127.0.0.0/8)."""

    def __init__(self, port, source="127.0.0.1"):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((source, 0))
        self.sock.connect(("127.0.0.1", port))
        self.sock.settimeout(0.2)

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.send(data)

    def poll(self, request_id, session, from_index):
        """The answer to one poll, or None when none came within 200 ms."""
        self.sock.send(poll_datagram(request_id, session, from_index))
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:
            try:
                data = self.sock.recv(4096)
            except (socket.timeout, ConnectionRefusedError):
                return None
            if len(data) == ANSWER_SIZE:
                a = parse_answer(data)
                if a["kind"] == ANSWER and a["request_id"] == request_id and a["from_index"] == from_index:
                    return a
        return None

    def collect(self, request_id, session, timeout=60, on_entries=None):
        """Polls until the request finishes; returns (last answer, entries)."""
        entries, nxt = [], 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            a = self.poll(request_id, session, nxt)
            if a and a["status"] == 0:
                entries += a["entries"]
                nxt += len(a["entries"])
                if on_entries and a["entries"]:
                    on_entries(entries)
                if a["finish"] and nxt >= a["produced"]:
                    return a, entries
            if not a or not a["entries"]:
                time.sleep(0.003)
        raise AssertionError(f"request {request_id} on {session} did not finish in {timeout} s")

    def run(self, request_id, session, prompt, **kw):
        self.send(generate(request_id, session, prompt, **kw))
        return self.collect(request_id, session)
