#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <functional>
#include <mutex>

namespace qwen3 {

// Open-addressing hash map from a (left id, right id) pair to (rank, result id).
class BpeModel::MergeTable {
 public:
  struct Value {
    uint32_t rank;
    int32_t result;
  };

  explicit MergeTable(const std::vector<Merge>& merges) {
    size_t capacity = 16;
    while (capacity < merges.size() * 2) capacity <<= 1;
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

// Results for words seen before. Sharded so that concurrent encodes rarely
// contend; each shard is simply cleared when full (bounded memory).
class BpeModel::WordCache {
 public:
  static constexpr size_t max_word_bytes = 64;

  bool lookup(std::string_view word, std::vector<int32_t>& out) {
    Shard& shard = shard_for(word);
    std::lock_guard lock(shard.mutex);
    auto it = shard.map.find(word);
    if (it == shard.map.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }

  void insert(std::string_view word, const int32_t* ids, size_t count) {
    Shard& shard = shard_for(word);
    std::lock_guard lock(shard.mutex);
    if (shard.map.size() >= max_entries_per_shard) shard.map.clear();
    shard.map.emplace(std::string(word), std::vector<int32_t>(ids, ids + count));
  }

 private:
  static constexpr size_t shard_count = 16;
  static constexpr size_t max_entries_per_shard = 4096;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> map;
  };
  Shard& shard_for(std::string_view word) {
    size_t h = word.size() * 31u + static_cast<uint8_t>(word.front()) * 7u +
               static_cast<uint8_t>(word.back());
    return shards_[h % shard_count];
  }
  std::array<Shard, shard_count> shards_;
};

BpeModel::BpeModel(std::array<int32_t, 256> byte_ids, const std::vector<Merge>& merges,
                   bool ignore_merges, std::unordered_map<std::string, int32_t> whole_word_ids)
    : byte_ids_(byte_ids),
      merges_(std::make_unique<MergeTable>(merges)),
      cache_(std::make_unique<WordCache>()),
      ignore_merges_(ignore_merges),
      whole_word_ids_(std::move(whole_word_ids)) {}

BpeModel::~BpeModel() = default;
BpeModel::BpeModel(BpeModel&&) noexcept = default;

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<uint8_t>(word[0])]);
    return;
  }
  bool cacheable = word.size() <= WordCache::max_word_bytes;
  if (cacheable && cache_->lookup(word, out)) return;
  size_t first = out.size();
  encode_word_uncached(word, out);
  if (cacheable) cache_->insert(word, out.data() + first, out.size() - first);
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
  };
  // Min-heap on (rank, position): the lowest rank first, the leftmost on ties.
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };

  const size_t n = word.size();
  std::vector<Symbol> symbols(n);
  for (size_t i = 0; i < n; ++i) {
    symbols[i] = {byte_ids_[static_cast<uint8_t>(word[i])], static_cast<int32_t>(i) - 1,
                  i + 1 < n ? static_cast<int32_t>(i + 1) : -1, true};
  }
  std::vector<Candidate> heap;
  heap.reserve(n);
  for (size_t i = 0; i + 1 < n; ++i) {
    if (const auto* m = merges_->find(symbols[i].id, symbols[i + 1].id)) {
      heap.push_back({m->rank, static_cast<uint32_t>(i), m->result});
    }
  }
  std::make_heap(heap.begin(), heap.end(), later);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    // Skip entries made stale by an earlier merge (same check as HF).
    const auto* current = merges_->find(left.id, right.id);
    if (!current || current->result != top.result) continue;

    left.id = top.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = static_cast<int32_t>(top.pos);

    if (left.prev >= 0) {
      if (const auto* m = merges_->find(symbols[left.prev].id, left.id)) {
        heap.push_back({m->rank, static_cast<uint32_t>(left.prev), m->result});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
    if (left.next >= 0) {
      if (const auto* m = merges_->find(left.id, symbols[left.next].id)) {
        heap.push_back({m->rank, top.pos, m->result});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace qwen3
