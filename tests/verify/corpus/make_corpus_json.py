#!/usr/bin/env python3
"""Writes <program>.json (fixtures + expected outcome) for every corpus program.

Packets are built from scratch here (headers, checksums computed by full
recomputation), independently of the C programs, so the expected output
packets are an independent statement of what each program must do.
Run from this directory: /usr/bin/python3 make_corpus_json.py
"""
import json
import struct

DST = bytes.fromhex("020000000002")
SRC = bytes.fromhex("020000000001")


def csum16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def eth(ethertype: int, payload: bytes, dst=DST, src=SRC) -> bytes:
    return dst + src + struct.pack("!H", ethertype) + payload


def vlan(vid: int, inner_type: int, payload: bytes) -> bytes:
    # The tag after the TPID (which is the EtherType of the enclosing header).
    return struct.pack("!HH", vid & 0xFFF, inner_type) + payload


def ipv4(proto: int, payload: bytes, ttl=64, frag=0, options=b"", ident=0x1234) -> bytes:
    ihl = 5 + len(options) // 4
    total = ihl * 4 + len(payload)
    hdr = struct.pack("!BBHHHBBH4s4s", (4 << 4) | ihl, 0, total, ident, frag, ttl, proto, 0,
                      bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])) + options
    c = csum16(hdr)
    return hdr[:10] + struct.pack("!H", c) + hdr[12:] + payload


def tcp(dport: int, sport=40000) -> bytes:
    return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x02, 65535, 0, 0)


def udp(dport: int, sport=40000, data=b"hello") -> bytes:
    return struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data


def icmp_echo() -> bytes:
    return struct.pack("!BBHHH", 8, 0, 0, 1, 1) + b"ping"


def ipv6(nexthdr: int, payload: bytes) -> bytes:
    src = bytes.fromhex("20010db8000000000000000000000001")
    dst = bytes.fromhex("20010db8000000000000000000000002")
    return struct.pack("!IHBB", 6 << 28, len(payload), nexthdr, 64) + src + dst + payload


def icmp6(t: int) -> bytes:
    return struct.pack("!BBHHH", t, 0, 0, 1, 1)


ARP = eth(0x0806, bytes.fromhex("0001080006040001") + SRC + bytes(4) + bytes(6) + bytes(4))
IP = 0x0800
IP6 = 0x86DD


def fx(name, packet, action, expected=None):
    f = {"name": name, "packet_hex": packet.hex(), "expected_action": action}
    if expected is not None:
        f["expected_packet_hex"] = expected.hex()
    return f


def ttl_pkt(ttl, ident):
    return eth(IP, ipv4(6, tcp(80), ttl=ttl, ident=ident))


def ttl_after(ttl, ident):
    # Full recomputation: rebuild the header with ttl-1.
    return eth(IP, ipv4(6, tcp(80), ttl=ttl - 1, ident=ident))


def swapped(p):
    return p[6:12] + p[0:6] + p[12:]


def expect(decision, stage="none", cls="none", **extra):
    e = {"decision": decision, "stage": stage, "class": cls}
    e.update(extra)
    return e


TCP80 = eth(IP, ipv4(6, tcp(80)))
corpus = {}

# --- correct programs
corpus["pass_all"] = ([fx("tcp", TCP80, "XDP_PASS", TCP80), fx("arp", ARP, "XDP_PASS")], expect("pass"))
corpus["drop_icmp"] = ([
    fx("icmp", eth(IP, ipv4(1, icmp_echo())), "XDP_DROP"),
    fx("tcp", TCP80, "XDP_PASS"),
    fx("arp", ARP, "XDP_PASS"),
    fx("truncated_ip", eth(IP, bytes(10)), "XDP_PASS"),
], expect("pass"))
corpus["port_filter"] = ([
    fx("telnet", eth(IP, ipv4(6, tcp(23))), "XDP_DROP"),
    fx("http", TCP80, "XDP_PASS"),
    fx("tftp", eth(IP, ipv4(17, udp(69))), "XDP_DROP"),
    fx("dns", eth(IP, ipv4(17, udp(53))), "XDP_PASS"),
    fx("telnet_with_ip_options", eth(IP, ipv4(6, tcp(23), options=bytes([1, 1, 1, 0]))), "XDP_DROP"),
    fx("ipv6", eth(IP6, ipv6(6, tcp(23))), "XDP_PASS"),
], expect("pass"))
corpus["ttl_decrement"] = ([
    fx("ttl64", ttl_pkt(64, 0x1234), "XDP_PASS", ttl_after(64, 0x1234)),
    fx("ttl255", ttl_pkt(255, 0xbeef), "XDP_PASS", ttl_after(255, 0xbeef)),
    fx("ttl2", ttl_pkt(2, 0x0001), "XDP_PASS", ttl_after(2, 0x0001)),
    fx("ttl1", ttl_pkt(1, 0x1234), "XDP_DROP"),
    fx("arp_untouched", ARP, "XDP_PASS", ARP),
], expect("pass"))
corpus["swap_macs_tx"] = ([
    fx("tcp", TCP80, "XDP_TX", swapped(TCP80)),
    fx("arp", ARP, "XDP_TX", swapped(ARP)),
], expect("pass"))
corpus["vlan_filter"] = ([
    fx("vlan100", eth(0x8100, vlan(100, IP, ipv4(6, tcp(80)))), "XDP_DROP"),
    fx("vlan200", eth(0x8100, vlan(200, IP, ipv4(6, tcp(80)))), "XDP_PASS"),
    fx("qinq_inner100", eth(0x88A8, vlan(300, 0x8100, vlan(100, IP, ipv4(6, tcp(80))))), "XDP_DROP"),
    fx("qinq_inner200", eth(0x88A8, vlan(300, 0x8100, vlan(200, IP, ipv4(6, tcp(80))))), "XDP_PASS"),
    fx("untagged", TCP80, "XDP_PASS"),
    fx("truncated_tag", eth(0x8100, b"\x00\x64"), "XDP_DROP"),
], expect("pass"))
corpus["ipv6_drop_icmpv6_echo"] = ([
    fx("echo_request", eth(IP6, ipv6(58, icmp6(128))), "XDP_DROP"),
    fx("echo_reply", eth(IP6, ipv6(58, icmp6(129))), "XDP_PASS"),
    fx("udp6", eth(IP6, ipv6(17, udp(53))), "XDP_PASS"),
    fx("ipv4_icmp", eth(IP, ipv4(1, icmp_echo())), "XDP_PASS"),
], expect("pass"))
good = eth(IP, ipv4(17, udp(53)))
bad = bytearray(good)
bad[14 + 10] ^= 0x55  # corrupt the header checksum
corpus["bounded_loop_checksum"] = ([
    fx("valid_checksum", good, "XDP_PASS"),
    fx("corrupt_checksum", bytes(bad), "XDP_DROP"),
    fx("ttl255", ttl_pkt(255, 0xbeef), "XDP_PASS"),
], expect("pass"))
corpus["map_counter"] = ([fx("tcp", TCP80, "XDP_PASS"), fx("arp", ARP, "XDP_PASS")], expect("pass"))
corpus["vmlinux_drop_ipv4_fragments"] = ([
    fx("first_fragment", eth(IP, ipv4(17, udp(53), frag=0x2000)), "XDP_DROP"),
    fx("later_fragment", eth(IP, ipv4(17, udp(53), frag=0x00b9)), "XDP_DROP"),
    fx("dont_fragment", eth(IP, ipv4(17, udp(53), frag=0x4000)), "XDP_PASS"),
    fx("arp", ARP, "XDP_PASS"),
], expect("pass"))
corpus["no_fixtures"] = ([], expect("pass", behaviour_checked=False, summary_contains="NOT checked"))
corpus["redirect_ifindex"] = ([fx("ipv4", TCP80, "XDP_REDIRECT"), fx("arp", ARP, "XDP_DROP")], expect("pass"))
tagged = eth(0x8100, vlan(42, IP, ipv4(6, tcp(80))))
corpus["vlan_pop"] = ([
    fx("tagged", tagged, "XDP_PASS", TCP80),
    fx("untagged", TCP80, "XDP_PASS", TCP80),
], expect("pass"))

# --- compile errors (line = first error's line)
corpus["compile_undeclared_identifier"] = ([], expect("fail", "compile", line=7))
corpus["compile_syntax_error"] = ([], expect("fail", "compile", line=7))
corpus["compile_missing_header"] = ([], expect("fail", "compile", line=2))
corpus["compile_implicit_function"] = ([], expect("fail", "compile", line=7))
corpus["compile_stack_too_big"] = ([], expect("fail", "compile", summary_contains="stack"))

# --- verifier rejections (line = the source line of the rejected access)
V = lambda cls, line=None: ([fx("tcp", TCP80, "XDP_PASS")], expect("fail", "verify", cls, **({"line": line} if line else {})))
corpus["verifier_no_bounds_check"] = V("packet_bounds", 11)
corpus["verifier_bounds_check_too_short"] = V("packet_bounds", 17)
# The loader's unprivileged verifier (no CAP_PERFMON) refuses variable offsets on packet pointers.
corpus["verifier_variable_offset_unchecked"] = V("other", 18)
corpus["verifier_variable_offset_unchecked"][1]["summary_contains"] = "prohibited for !root"
corpus["verifier_null_array_lookup"] = V("null_check_missing", 16)
corpus["verifier_null_hash_read"] = V("null_check_missing", 17)
corpus["verifier_null_checked_wrong_pointer"] = V("null_check_missing", 20)
# Uninitialised registers: the verifier refuses them for every loader.
corpus["verifier_uninit_reg_redirect_flags"] = V("uninitialized", 9)
corpus["verifier_uninit_reg_csum_seed"] = V("uninitialized", 10)
corpus["verifier_uninit_reg_update_flags"] = V("uninitialized", 16)
# Uninitialised stack: refused since the loader keeps no CAP_PERFMON (issue 22).
corpus["verifier_uninit_map_key"] = V("uninitialized", 24)
corpus["verifier_uninit_stack_read"] = V("uninitialized", 11)
corpus["verifier_uninit_map_value"] = V("uninitialized", 23)
corpus["verifier_infinite_loop"] = V("unbounded_loop")
corpus["verifier_loop_bound_from_packet"] = V("unbounded_loop")
corpus["verifier_loop_too_long"] = V("unbounded_loop")
corpus["verifier_helper_scalar_key"] = V("invalid_helper_argument", 15)
corpus["verifier_helper_packet_as_ctx"] = V("invalid_helper_argument", 12)
corpus["verifier_helper_not_a_map"] = V("invalid_helper_argument", 11)
corpus["verifier_helper_negative_length"] = V("invalid_helper_argument", 10)
corpus["verifier_ctx_write"] = V("invalid_context_access", 8)
corpus["verifier_ctx_out_of_range"] = V("invalid_context_access", 8)
corpus["verifier_ctx_narrow_data_end"] = V("invalid_context_access", 8)
corpus["verifier_other_invalid_helper_id"] = V("other", 10)
corpus["verifier_other_unknown_helper"] = V("other", 9)
corpus["verifier_other_send_signal"] = V("other", 8)
corpus["verifier_other_probe_read_in_subprog"] = V("other", 8)
corpus["verifier_other_probe_read_in_subprog"][1]["summary_contains"] = "bpf_probe_read"
corpus["verifier_other_send_signal"][1]["summary_contains"] = "bpf_send_signal"
# Refused before the verifier runs: the helper could copy kernel memory into the packet.
corpus["verifier_other_probe_read_kernel"] = V("other", 12)
corpus["verifier_other_probe_read_kernel"][1]["summary_contains"] = "bpf_probe_read_kernel"

# --- wrong behaviour
corpus["wrong_verdict_drops_tcp"] = ([
    fx("icmp", eth(IP, ipv4(1, icmp_echo())), "XDP_DROP"),
    fx("tcp", TCP80, "XDP_PASS"),
], expect("fail", "behaviour", failing_fixtures=["icmp", "tcp"]))
corpus["wrong_verdict_byte_order"] = ([
    fx("telnet", eth(IP, ipv4(6, tcp(23))), "XDP_DROP"),
    fx("http", TCP80, "XDP_PASS"),
], expect("fail", "behaviour", failing_fixtures=["telnet"]))
corpus["wrong_rewrite_ttl_no_checksum"] = ([
    fx("ttl64", ttl_pkt(64, 0x1234), "XDP_PASS", ttl_after(64, 0x1234)),
    fx("ttl1", ttl_pkt(1, 0x1234), "XDP_DROP"),
], expect("fail", "behaviour", failing_fixtures=["ttl64"]))
# Returning a pointer leaks it: the unprivileged verifier refuses it before any run.
corpus["wrong_verdict_returns_pointer"] = ([fx("tcp", TCP80, "XDP_PASS")],
                                           expect("fail", "verify", "other", line=9, summary_contains="leaks addr"))
corpus["wrong_rewrite_mac_copy"] = ([
    fx("tcp", TCP80, "XDP_TX", swapped(TCP80)),
], expect("fail", "behaviour", failing_fixtures=["tcp"]))

# --- fixtures the kernel cannot run / malformed fixtures
# A frame under 14 bytes is not run (the kernel refuses it): counted and
# reported, never a failure of a program that passes every runnable fixture.
RUNT = {"name": "runt", "packet_hex": "02000000000202000000", "expected_action": "XDP_DROP"}
corpus["fixture_short_packet"] = ([fx("ok", TCP80, "XDP_PASS"), RUNT],
                                  expect("pass", summary_contains="shorter than an Ethernet header",
                                         fixtures_not_run=1))
corpus["fixture_only_short_packets"] = ([RUNT], expect("error", "behaviour", summary_contains="none of the",
                                                       fixtures_not_run=1, behaviour_checked=False))
corpus["fixture_malformed_hex"] = ([
    fx("ok", TCP80, "XDP_PASS"),
    {"name": "bad_hex", "packet_hex": "0200zz", "expected_action": "XDP_PASS"},
], expect("error", "behaviour", summary_contains="malformed"))
corpus["fixture_unknown_action"] = ([
    {"name": "bad_action", "packet_hex": TCP80.hex(), "expected_action": "XDP_FOO"},
], expect("error", "behaviour", summary_contains="XDP_FOO"))

# --- policy
for name in ["policy_two_programs", "policy_no_xdp_section", "policy_libc_header", "policy_pragma_diagnostic",
             "policy_include_next", "policy_map_pinning", "policy_raw_section_attribute"]:
    corpus[name] = ([fx("tcp", TCP80, "XDP_PASS")], expect("fail", "policy"))

# --- sandbox escapes: all stopped by the policy, except the compile bomb (compiler limits)
for name in ["escape_include_etc_shadow", "escape_include_secret_file", "escape_include_dotdot",
             "escape_include_angle_dotdot", "escape_include_through_linux_dir", "escape_has_include",
             "escape_incbin_asm", "escape_embed", "escape_line_splice", "escape_digraph_include",
             "escape_comment_in_directive", "escape_macro_include", "escape_token_paste_has_include",
             "escape_pragma_operator", "escape_proc_environ"]:
    corpus[name] = ([fx("tcp", TCP80, "XDP_PASS")], expect("fail", "policy"))
corpus["escape_very_long_source"] = ([], expect("fail", "policy", summary_contains="limit"))
corpus["escape_very_long_source"][1]["pad_to_bytes"] = 300000
corpus["escape_compile_bomb"] = ([], expect("fail", "compile", summary_contains="limit"))

# --- issue 13: real programs
def guardian(task, validator, tests, maps=None):
    """A fixture file in the BPF-Guardian tests.json format, with a field the
    service does not know (ignored)."""
    doc = {"schema_version": "1.0", "task_id": task, "test_count": len(tests),
           "validator": {"type": validator, "description": "checked by the harness"},
           "tests": tests, "generator": "make_corpus_json.py"}
    if maps:
        doc["maps"] = maps
    return doc


def gtest(name, packet, action, weight=None, **extra):
    t = {"name": name, "description": "%s -> %s" % (name, action), "packet_hex": packet.hex(),
         "expected_action": action}
    if weight is not None:
        t["weight"] = weight
    t.update(extra)
    return t


def u64(v):
    return struct.pack("<Q", v).hex()


ICMP = eth(IP, ipv4(1, icmp_echo()))
corpus["guardian_drop_icmp"] = (guardian("drop_icmp", "packet_action", [
    gtest("icmp", ICMP, "XDP_DROP", 2),
    gtest("tcp", TCP80, "XDP_PASS", 1),
    gtest("arp", ARP, "XDP_PASS"),
    {"name": "runt_10_bytes", "description": "too short for Ethernet", "packet_hex": "02000000000202000000",
     "expected_action": "XDP_PASS", "weight": 1},
]), expect("pass", fixtures_not_run=1, summary_contains="not run"))
corpus["guardian_swap_macs_bytes"] = (guardian("swap_macs", "packet_bytes", [
    gtest("tcp", TCP80, "XDP_TX", expected_packet_hex=swapped(TCP80).hex()),
    gtest("arp_no_expected_bytes", ARP, "XDP_TX"),
]), expect("pass", fixtures_not_checked=1, summary_contains="not checked"))
corpus["wrong_guardian_bytes_not_swapped"] = (guardian("swap_macs", "packet_bytes", [
    gtest("tcp", TCP80, "XDP_TX", expected_packet_hex=swapped(TCP80).hex()),
    gtest("arp_no_expected_bytes", ARP, "XDP_TX"),
]), expect("fail", "behaviour", failing_fixtures=["tcp"], fixtures_not_checked=1))
COUNT_TESTS = [
    gtest("ipv4", TCP80, "XDP_PASS", expected_maps=[{"map": "counters", "key_u32": 0, "value_hex": u64(1)}]),
    gtest("arp", ARP, "XDP_PASS", expected_maps=[{"map": "counters", "key_u32": 1, "value_hex": u64(1)},
                                                 {"map": "counters", "key_u32": 0, "value_hex": u64(1)}]),
    gtest("ipv4_again", ICMP, "XDP_PASS", expected_maps=[{"map": "counters", "key_u32": 0, "value_u32": 2}]),
    gtest("arp_unchecked", ARP, "XDP_PASS"),
]
corpus["guardian_map_state_counter"] = (guardian("count", "map_state", COUNT_TESTS),
                                        expect("pass", fixtures_not_checked=1))
corpus["wrong_guardian_map_state_counter"] = (guardian("count", "map_state", COUNT_TESTS),
                                              expect("fail", "behaviour", failing_fixtures=["arp", "ipv4_again"]))
corpus["libc_if_h_ifnamsiz"] = ([
    fx("arp", ARP, "XDP_PASS"),
    fx("ethertype_5", eth(0x0005, bytes(20)), "XDP_DROP"),
], expect("pass"))
corpus["dynptr_kfunc_slice"] = ([fx("arp", ARP, "XDP_DROP"), fx("tcp", TCP80, "XDP_PASS")], expect("pass"))
corpus["asm_bound_offset"] = ([
    fx("tcp", TCP80, "XDP_PASS"),
    fx("zero_offset", eth(IP, bytes(20)), "XDP_DROP"),
], expect("pass"))
corpus["verifier_asm_moves_checked_pointer"] = V("packet_bounds", 16)
corpus["verifier_asm_sign_extended_offset"] = V("other", 20)
corpus["verifier_asm_sign_extended_offset"][1]["summary_contains"] = "prohibited for !root"
corpus["perf_event_output"] = ([fx("tcp", TCP80, "XDP_PASS")], expect("pass"))
corpus["ringbuf_output"] = ([fx("tcp", TCP80, "XDP_PASS")], expect("pass"))
LOOPBACK_SLOT0 = [{"map": "tx_port", "key_u32": 0, "value_ifindex": "lo"}]
corpus["redirect_devmap_loopback"] = ({"fixtures": [fx("ipv4", TCP80, "XDP_REDIRECT"), fx("arp", ARP, "XDP_DROP")],
                                       "maps": LOOPBACK_SLOT0}, expect("pass"))
corpus["wrong_redirect_devmap_unfilled"] = ([fx("ipv4", TCP80, "XDP_REDIRECT"), fx("arp", ARP, "XDP_DROP")],
                                            expect("fail", "behaviour", failing_fixtures=["ipv4"],
                                                   summary_contains="XDP_ABORTED"))
# Security: kernel-memory readers are refused before the verifier runs.
# (line: the call; for the kernel variable, its declaration)
for name, what, line in [("verifier_sec_sk_lookup_tcp", "socket lookup", 17),
                         ("verifier_sec_skc_to_tcp_sock", "socket cast", 9),
                         ("verifier_sec_kfunc_cast_to_kern_ctx", "BTF cast", 11),
                         ("verifier_sec_kfunc_ct_lookup", "pointer-returning lookup", 11),
                         ("verifier_sec_ksym_variable", "kernel variable", 7),
                         ("verifier_sec_helper_not_allowlisted", "allowlist", 9)]:
    corpus[name] = V("other", line)
    corpus[name][1]["summary_contains"] = what
# Security: what raw strings or asm could hide from the policy.
for name, what in [("escape_raw_string_include", "raw string"), ("escape_raw_string_incbin", "raw string"),
                   ("escape_raw_string_embed", "raw string"), ("escape_raw_string_ksym", "raw string"),
                   ("escape_asm_include_directive", "assembler directive .include"),
                   ("escape_asm_escaped_incbin", "assembler directive .incbin"),
                   ("escape_asm_macro_template", "inline assembly must")]:
    corpus[name] = ([fx("tcp", TCP80, "XDP_PASS")], expect("fail", "policy", summary_contains=what))

# Diagnosis spans: the operand of the instruction that lost the proof (column
# from the object's BTF line info), or the name of a refused call.
for name, span in [("verifier_no_bounds_check", "h_proto"), ("verifier_uninit_stack_read", "p[5]"),
                   ("verifier_null_checked_wrong_pointer", "*b"), ("verifier_helper_scalar_key", "bpf_map_lookup_elem"),
                   ("verifier_sec_sk_lookup_tcp", "bpf_sk_lookup_tcp"), ("verifier_sec_skc_to_tcp_sock", "bpf_skc_to_tcp_sock"),
                   ("verifier_sec_kfunc_ct_lookup", "bpf_xdp_ct_lookup")]:
    corpus[name][1]["span"] = span

# Cases that run another case's program with other fixtures ("program": its file).
for name, program in [("guardian_drop_icmp", "drop_icmp.c"), ("guardian_swap_macs_bytes", "swap_macs_tx.c"),
                      ("wrong_guardian_bytes_not_swapped", "wrong_rewrite_mac_copy.c"),
                      ("wrong_redirect_devmap_unfilled", "redirect_devmap_loopback.c")]:
    corpus[name][1]["program"] = program

if __name__ == "__main__":
    import os
    missing = [n for n in corpus if not os.path.exists(corpus[n][1].get("program", n + ".c"))]
    extra = [f[:-2] for f in os.listdir(".") if f.endswith(".c") and f[:-2] not in corpus]
    assert not missing and not extra, (missing, extra)
    for name, (fixtures, exp) in sorted(corpus.items()):
        pad = exp.pop("pad_to_bytes", None)
        options = exp.pop("options", None)
        program = exp.pop("program", None)
        doc = {"fixtures": fixtures, "expect": exp}
        if program:
            doc["program"] = program
        if pad:
            doc["pad_to_bytes"] = pad
        if options:
            doc["options"] = options
        with open(name + ".json", "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    print(len(corpus), "programs")
