#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <functional>
#include <atomic>
#include <cstring>

namespace qwen3 {

// Open-addressing hash map from a (left id, right id) pair to (rank, result id).
class BpeModel::MergeTable {
 public:
  using Value = PairValue;

  explicit MergeTable(const std::vector<Merge>& merges) {
    size_t capacity = 16;
    while (capacity < merges.size() + merges.size() / 2) capacity <<= 1;
    mask_ = capacity - 1;
    slots_.assign(capacity, Slot{empty_key, {0, 0}});
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const Merge& m = merges[rank];
      Slot& slot = find_slot(key(m.left, m.right));
      slot.key = key(m.left, m.right);
      slot.value = {static_cast<uint32_t>(rank), m.result};
    }
  }

  const Value* find(int32_t left, int32_t right) const {
    uint64_t k = key(left, right);
    size_t i = hash(k) & mask_;
    while (true) {
      const Slot& s = slots_[i];
      if (s.key == k) return &s.value;
      if (s.key == empty_key) return nullptr;
      i = (i + 1) & mask_;
    }
  }

 private:
  static constexpr uint64_t empty_key = ~0ULL;
  struct Slot {
    uint64_t key;
    Value value;
  };
  static uint64_t key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  static size_t hash(uint64_t k) { return static_cast<size_t>((k * 0x9E3779B97F4A7C15ULL) >> 20); }
  Slot& find_slot(uint64_t k) {
    size_t i = hash(k) & mask_;
    while (slots_[i].key != empty_key && slots_[i].key != k) i = (i + 1) & mask_;
    return slots_[i];
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// Results for words seen before: a direct-mapped table per thread (no locks;
// a colliding word simply replaces the old entry), one 64-byte line per slot.
// Only short words with few ids are cached; they are nearly all of them.
class BpeModel::WordCache {
 public:
  static constexpr size_t max_word_bytes = 22;
  static constexpr size_t max_ids = 8;

  explicit WordCache(uint64_t model_serial) : serial_(model_serial) {}

  bool lookup(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const {
    const Slot& slot = slots()[hash & (slot_count - 1)];
    if (slot.hash != hash || slot.key_len != word.size() ||
        std::memcmp(slot.key, word.data(), word.size()) != 0) {
      return false;
    }
    out.insert(out.end(), slot.ids, slot.ids + slot.id_count);
    return true;
  }

  void insert(std::string_view word, uint64_t hash, const int32_t* ids, size_t count) const {
    if (count > max_ids) return;
    Slot& slot = slots()[hash & (slot_count - 1)];
    slot.hash = hash;
    slot.key_len = static_cast<uint8_t>(word.size());
    slot.id_count = static_cast<uint8_t>(count);
    std::memcpy(slot.key, word.data(), word.size());
    std::memcpy(slot.ids, ids, count * sizeof(int32_t));
  }

  static uint64_t hash(std::string_view word) {
    uint64_t h = 0x243F6A8885A308D3ULL ^ word.size();
    size_t i = 0;
    for (; i + 8 <= word.size(); i += 8) {
      uint64_t chunk;
      std::memcpy(&chunk, word.data() + i, 8);
      h = (h ^ chunk) * 0x9E3779B97F4A7C15ULL;
      h ^= h >> 29;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, word.data() + i, word.size() - i);
    h = (h ^ tail) * 0x9E3779B97F4A7C15ULL;
    h ^= h >> 32;
    return h | 1;  // 0 marks an empty slot
  }

 private:
  static constexpr size_t slot_count = 1 << 14;  // 1 MiB per thread and tokenizer
  struct alignas(64) Slot {
    uint64_t hash;
    uint8_t key_len;
    uint8_t id_count;
    char key[max_word_bytes];
    int32_t ids[max_ids];
  };
  static_assert(sizeof(Slot) == 64);

  // This thread's table for this model (tables of destroyed models stay
  // until the thread exits; serials are never reused).
  Slot* slots() const {
    struct Table {
      uint64_t serial;
      std::unique_ptr<Slot[]> slots;
    };
    thread_local std::vector<Table> tables;
    for (auto& t : tables) {
      if (t.serial == serial_) return t.slots.get();
    }
    tables.push_back({serial_, std::make_unique<Slot[]>(slot_count)});  // value-initialised: empty
    return tables.back().slots.get();
  }

  uint64_t serial_;
};

namespace {
std::atomic<uint64_t> next_model_serial{1};
}  // namespace

BpeModel::BpeModel(std::array<int32_t, 256> byte_ids, const std::vector<Merge>& merges,
                   bool ignore_merges, std::unordered_map<std::string, int32_t> whole_word_ids)
    : byte_ids_(byte_ids),
      merges_(std::make_unique<MergeTable>(merges)),
      cache_(std::make_unique<WordCache>(next_model_serial.fetch_add(1))),
      ignore_merges_(ignore_merges),
      whole_word_ids_(std::move(whole_word_ids)) {
  // Dense table for the first round of lookups (pairs of single bytes).
  byte_pairs_.assign(256 * 256, PairValue{no_merge, -1});
  for (unsigned a = 0; a < 256; ++a) {
    for (unsigned b = 0; b < 256; ++b) {
      if (const auto* m = merges_->find(byte_ids_[a], byte_ids_[b])) byte_pairs_[a * 256 + b] = *m;
    }
  }
  std::unordered_map<int32_t, uint64_t> pair_of_result;
  for (const Merge& m : merges) {
    uint64_t pair = (static_cast<uint64_t>(static_cast<uint32_t>(m.left)) << 32) | static_cast<uint32_t>(m.right);
    auto [it, inserted] = pair_of_result.emplace(m.result, pair);
    if (!inserted && it->second != pair) unique_results_ = false;
  }
}

BpeModel::~BpeModel() = default;
BpeModel::BpeModel(BpeModel&&) noexcept = default;

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<uint8_t>(word[0])]);
    return;
  }
  if (word.size() > WordCache::max_word_bytes) {
    encode_word_uncached(word, out);
    return;
  }
  const uint64_t hash = WordCache::hash(word);
  if (cache_->lookup(word, hash, out)) return;
  size_t first = out.size();
  encode_word_uncached(word, out);
  cache_->insert(word, hash, out.data() + first, out.size() - first);
}

void BpeModel::encode_word_uncached(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    auto it = whole_word_ids_.find(std::string(word));
    if (it != whole_word_ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  struct Candidate {
    uint32_t rank;
    uint32_t pos;
    int32_t result;
    int32_t left;   // the pair's ids when it was pushed
    int32_t right;
  };
  // Min-heap on (rank, position): the lowest rank first, the leftmost on ties.
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };

  // Small words (nearly all) work in stack buffers; at most 3n candidates are
  // ever pushed (n-1 initial pairs, then two per merge).
  constexpr size_t small = 64;
  const size_t n = word.size();
  Symbol small_symbols[small];
  Candidate small_heap[3 * small];
  std::vector<Symbol> large_symbols;
  std::vector<Candidate> large_heap;
  Symbol* symbols = small_symbols;
  Candidate* heap = small_heap;
  if (n > small) {
    large_symbols.resize(n);
    large_heap.resize(3 * n);
    symbols = large_symbols.data();
    heap = large_heap.data();
  }
  size_t heap_size = 0;
  for (size_t i = 0; i < n; ++i) {
    symbols[i] = {byte_ids_[static_cast<uint8_t>(word[i])], static_cast<int32_t>(i) - 1,
                  i + 1 < n ? static_cast<int32_t>(i + 1) : -1, true};
  }
  auto push = [&](Candidate c) {
    heap[heap_size++] = c;
    std::push_heap(heap, heap + heap_size, later);
  };
  for (size_t i = 0; i + 1 < n; ++i) {
    const PairValue& m =
        byte_pairs_[static_cast<uint8_t>(word[i]) * 256 + static_cast<uint8_t>(word[i + 1])];
    if (m.rank != no_merge) {
      heap[heap_size++] = {m.rank, static_cast<uint32_t>(i), m.result, symbols[i].id, symbols[i + 1].id};
    }
  }
  std::make_heap(heap, heap + heap_size, later);

  while (heap_size > 0) {
    std::pop_heap(heap, heap + heap_size, later);
    Candidate top = heap[--heap_size];
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    // Skip entries made stale by an earlier merge. HF re-looks the current
    // pair up and compares the result id; when both ids are unchanged that
    // check passes, and when no result id comes from two different pairs it
    // fails otherwise, so the lookup is only needed in that rare case.
    if (left.id != top.left || right.id != top.right) {
      if (unique_results_) continue;
      const auto* current = merges_->find(left.id, right.id);
      if (!current || current->result != top.result) continue;
    }

    left.id = top.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = static_cast<int32_t>(top.pos);

    if (left.prev >= 0) {
      if (const auto* m = merges_->find(symbols[left.prev].id, left.id)) {
        push({m->rank, static_cast<uint32_t>(left.prev), m->result, symbols[left.prev].id, left.id});
      }
    }
    if (left.next >= 0) {
      if (const auto* m = merges_->find(left.id, symbols[left.next].id)) {
        push({m->rank, top.pos, m->result, left.id, symbols[left.next].id});
      }
    }
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace qwen3
