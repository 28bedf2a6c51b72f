// The allowlist of what a packet program may call (docs/xdp-verify.md, "What a
// program may call"): helpers by id, kfuncs by name, and the kfuncs an ELF
// object declares before libbpf opens it. Declared in bpf_loader.h.
#include <bpf/btf.h>
#include <linux/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <set>
#include <string>

#include "verify/bpf_loader.h"

namespace qwen3::verify {

// What a packet program may call: an allowlist (docs/xdp-verify.md, "What a
// program may call"). Everything else is refused with the class of the refusal.
std::string helper_refusal(int32_t id) {
  switch (id) {
    // Maps, time, randomness, bounded iteration.
    case BPF_FUNC_map_lookup_elem: case BPF_FUNC_map_update_elem: case BPF_FUNC_map_delete_elem:
    case BPF_FUNC_map_push_elem: case BPF_FUNC_map_pop_elem: case BPF_FUNC_map_peek_elem:
    case BPF_FUNC_map_lookup_percpu_elem: case BPF_FUNC_for_each_map_elem: case BPF_FUNC_loop:
    case BPF_FUNC_get_prandom_u32: case BPF_FUNC_get_smp_processor_id: case BPF_FUNC_get_numa_node_id:
    case BPF_FUNC_tail_call: case BPF_FUNC_ktime_get_ns: case BPF_FUNC_ktime_get_boot_ns:
    case BPF_FUNC_ktime_get_coarse_ns: case BPF_FUNC_ktime_get_tai_ns: case BPF_FUNC_jiffies64:
    case BPF_FUNC_strncmp: case BPF_FUNC_spin_lock: case BPF_FUNC_spin_unlock:
    case BPF_FUNC_timer_init: case BPF_FUNC_timer_set_callback: case BPF_FUNC_timer_start:
    case BPF_FUNC_timer_cancel:
    // Output channels that lead nowhere for an unattached program.
    case BPF_FUNC_ringbuf_output: case BPF_FUNC_ringbuf_reserve: case BPF_FUNC_ringbuf_submit:
    case BPF_FUNC_ringbuf_discard: case BPF_FUNC_ringbuf_query: case BPF_FUNC_ringbuf_reserve_dynptr:
    case BPF_FUNC_ringbuf_submit_dynptr: case BPF_FUNC_ringbuf_discard_dynptr:
    case BPF_FUNC_perf_event_output:
    // Dynptrs over the program's own memory.
    case BPF_FUNC_dynptr_from_mem: case BPF_FUNC_dynptr_read: case BPF_FUNC_dynptr_write:
    case BPF_FUNC_dynptr_data:
    // The packet and its fate.
    case BPF_FUNC_csum_diff: case BPF_FUNC_xdp_adjust_head: case BPF_FUNC_xdp_adjust_meta:
    case BPF_FUNC_xdp_adjust_tail: case BPF_FUNC_redirect: case BPF_FUNC_redirect_map:
    case BPF_FUNC_fib_lookup: case BPF_FUNC_check_mtu: case BPF_FUNC_xdp_get_buff_len:
    case BPF_FUNC_xdp_load_bytes: case BPF_FUNC_xdp_store_bytes:
    case BPF_FUNC_tcp_raw_gen_syncookie_ipv4: case BPF_FUNC_tcp_raw_gen_syncookie_ipv6:
    case BPF_FUNC_tcp_raw_check_syncookie_ipv4: case BPF_FUNC_tcp_raw_check_syncookie_ipv6:
      return "";
    case BPF_FUNC_sk_lookup_tcp: case BPF_FUNC_sk_lookup_udp: case BPF_FUNC_skc_lookup_tcp:
    case BPF_FUNC_sk_release: case BPF_FUNC_get_listener_sock: case BPF_FUNC_sk_fullsock:
    case BPF_FUNC_tcp_sock: case BPF_FUNC_tcp_check_syncookie: case BPF_FUNC_tcp_gen_syncookie:
    case BPF_FUNC_sk_storage_get: case BPF_FUNC_sk_storage_delete:
      return "socket lookup: it returns a pointer to a host kernel socket, through which a program reads "
             "kernel memory";
    case BPF_FUNC_skc_to_tcp6_sock: case BPF_FUNC_skc_to_tcp_sock: case BPF_FUNC_skc_to_tcp_timewait_sock:
    case BPF_FUNC_skc_to_tcp_request_sock: case BPF_FUNC_skc_to_udp6_sock: case BPF_FUNC_skc_to_unix_sock:
    case BPF_FUNC_skc_to_mptcp_sock:
      return "socket cast: it returns a BTF pointer to a kernel socket, which the program could walk "
             "(sk->sk_socket->file->f_cred ...)";
    case BPF_FUNC_probe_read: case BPF_FUNC_probe_read_str: case BPF_FUNC_probe_read_kernel:
    case BPF_FUNC_probe_read_kernel_str: case BPF_FUNC_probe_read_user: case BPF_FUNC_probe_read_user_str:
    case BPF_FUNC_copy_from_user: case BPF_FUNC_copy_from_user_task: case BPF_FUNC_get_current_task:
    case BPF_FUNC_get_current_task_btf: case BPF_FUNC_task_pt_regs: case BPF_FUNC_per_cpu_ptr:
    case BPF_FUNC_this_cpu_ptr: case BPF_FUNC_snprintf_btf: case BPF_FUNC_snprintf:
    case BPF_FUNC_kptr_xchg:
      return "kernel memory read: it copies kernel or user memory, or hands out BTF pointers to kernel objects";
    case BPF_FUNC_trace_printk: case BPF_FUNC_trace_vprintk: case BPF_FUNC_send_signal:
    case BPF_FUNC_send_signal_thread:
      return "side effect on the host: it signals the loader or prints to the trace buffer";
    default:
      return "not on the packet-program allowlist of the verification service";
  }
}

// kfuncs a packet program needs: dynptrs over the packet, open-coded
// iterators, XDP RX metadata, workqueues. Everything else (conntrack/xfrm lookups that
// return kernel objects, bpf_cast_to_kern_ctx, bpf_rdonly_cast, object
// allocation, ...) is refused.
std::string kfunc_refusal(const std::string& name) {
  static const std::set<std::string> allowed = {
      "bpf_dynptr_from_xdp", "bpf_dynptr_slice",        "bpf_dynptr_slice_rdwr",
      "bpf_dynptr_adjust",   "bpf_dynptr_is_null",      "bpf_dynptr_is_rdonly",
      "bpf_dynptr_size",     "bpf_dynptr_clone",        "bpf_iter_num_new",
      "bpf_iter_num_next",   "bpf_iter_num_destroy",    "bpf_xdp_metadata_rx_timestamp",
      "bpf_xdp_metadata_rx_hash", "bpf_xdp_metadata_rx_vlan_tag",
      // The workqueue twins of the bpf_timer_* helpers: a callback of the program on its own map value.
      "bpf_wq_init", "bpf_wq_set_callback_impl", "bpf_wq_start"};
  if (allowed.count(name)) return "";
  static const std::set<std::string> lookups = {"bpf_xdp_ct_lookup", "bpf_xdp_ct_alloc", "bpf_skb_ct_lookup",
                                                "bpf_skb_ct_alloc", "bpf_xdp_get_xfrm_state", "bpf_ct_insert_entry"};
  if (lookups.count(name) || name.find("lookup") != std::string::npos)
    return "pointer-returning lookup: it returns a kernel object (connection, xfrm state) the program could read";
  if (name == "bpf_cast_to_kern_ctx" || name == "bpf_rdonly_cast" || name.find("cast") != std::string::npos)
    return "BTF cast: it turns a pointer into a BTF pointer to a kernel structure, which the program could walk";
  return "not on the packet-program kfunc allowlist of the verification service";
}

// The kfuncs the ELF declares, judged from its own BTF before libbpf rewrites
// them (it turns their .ksyms entries into placeholders when it opens the
// object): without CAP_PERFMON the verifier would refuse some uses first, with
// a vaguer message, and the others must not load at all.
std::string elf_kfunc_refusal(const std::string& object) {
  const int fd = memfd_create("verify-object", MFD_CLOEXEC);
  if (fd < 0) return "";
  std::string why;
  if (write(fd, object.data(), object.size()) == static_cast<ssize_t>(object.size())) {
    struct btf* btf = btf__parse_elf(("/proc/self/fd/" + std::to_string(fd)).c_str(), nullptr);
    if (btf) {
      for (uint32_t id = 1; id < btf__type_cnt(btf) && why.empty(); ++id) {
        const struct btf_type* t = btf__type_by_id(btf, id);
        if (!btf_is_func(t) || btf_vlen(t) != BTF_FUNC_EXTERN) continue;
        const std::string name = btf__name_by_offset(btf, t->name_off);
        if (std::string r = kfunc_refusal(name); !r.empty())
          why = "the program calls the kfunc " + name + ": " + r + "; it is not allowed in the verification service";
      }
      btf__free(btf);
    }
  }
  close(fd);
  return why;
}

}  // namespace qwen3::verify
