// Byte-level BPE by merge rank, as Hugging Face tokenizers' BPE model does it:
// a word starts as one symbol per byte; the adjacent pair with the lowest merge
// rank (leftmost on ties) is merged until no pair has a merge. A min-heap over
// a linked list of symbols keeps this O(n log n) per word.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace qwen3 {

class BpeModel {
 public:
  struct Merge {
    int32_t left;
    int32_t right;
    int32_t result;
  };

  // byte_ids[b] is the vocabulary id of the single-byte token for b. Merges are
  // in rank order; a later duplicate pair overrides an earlier one (as in HF).
  // whole_word_ids is only consulted when ignore_merges is set (HF option: a
  // word that is itself in the vocabulary is taken as is).
  BpeModel(std::array<int32_t, 256> byte_ids, const std::vector<Merge>& merges,
           bool ignore_merges, std::unordered_map<std::string, int32_t> whole_word_ids);
  ~BpeModel();
  BpeModel(BpeModel&&) noexcept;

  // Appends the ids of one pre-tokenized word (raw bytes). Thread-safe (the
  // word cache is per thread).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // Same without the word cache (for tests and the benchmark).
  void encode_word_uncached(std::string_view word, std::vector<int32_t>& out) const;

 private:
  class MergeTable;
  class WordCache;
  std::array<int32_t, 256> byte_ids_;
  struct PairValue {
    uint32_t rank;
    int32_t result;
  };
  static constexpr uint32_t no_merge = 0xFFFFFFFFu;
  std::unique_ptr<MergeTable> merges_;
  std::vector<PairValue> byte_pairs_;  // [first byte * 256 + second byte]
  bool unique_results_ = true;         // no merge result comes from two different pairs
  std::unique_ptr<WordCache> cache_;
  bool ignore_merges_;
  std::unordered_map<std::string, int32_t> whole_word_ids_;
};

}  // namespace qwen3
