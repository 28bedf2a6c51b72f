// The C++ tokenizer against the independent JS implementation (@lenml/tokenizers)
// on the >= 1 MB corpus written by oracle/make_oracle.js: zero differences in
// ids (with and without special-token parsing) and in decoded text.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace qwen3 {
namespace {

using json = nlohmann::json;

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> records;
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << path << " is missing: the ctest fixture tokenizer_oracle_generate "
                  << "(node + @lenml/tokenizers) must run first";
    return records;
  }
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) records.push_back(json::parse(line));
  }
  return records;
}

std::string show_ids(const std::vector<int32_t>& ids, size_t around) {
  std::string s;
  size_t from = around > 4 ? around - 4 : 0;
  for (size_t i = from; i < ids.size() && i < around + 5; ++i) s += std::to_string(ids[i]) + " ";
  return s;
}

// Describes the first difference between two id sequences.
std::string first_difference(const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return "first difference at token " + std::to_string(i) + ": got [" + show_ids(got, i) +
         "] want [" + show_ids(want, i) + "] (lengths " + std::to_string(got.size()) + " vs " +
         std::to_string(want.size()) + ")";
}

TEST(TokenizerOracle, CorpusIsAtLeastOneMegabyte) {
  auto records = read_jsonl(test::oracle_dir() + "/corpus.jsonl");
  size_t bytes = 0;
  std::set<std::string> kinds;
  for (const auto& r : records) {
    bytes += r["text"].get<std::string>().size();
    kinds.insert(r["kind"].get<std::string>().substr(0, 4));
  }
  EXPECT_GE(bytes, 1u << 20) << "corpus too small";
  // Every generator kind is present (file samples, lines, mixes, random Unicode, ...).
  for (const char* k : {"file", "line", "mix", "unic", "cont", "nfd", "whit", "long"}) {
    EXPECT_TRUE(kinds.count(k)) << "no documents of kind " << k;
  }
}

TEST(TokenizerOracle, EncodeAndDecodeMatchJsOnCorpus) {
  auto tok = test::qwen3_tokenizer();
  ASSERT_TRUE(tok);
  auto records = read_jsonl(test::oracle_dir() + "/corpus.jsonl");
  ASSERT_FALSE(records.empty());
  size_t encode_diffs = 0, plain_diffs = 0, decode_diffs = 0, round_trip_diffs = 0, plain_checked = 0;
  size_t reported = 0;
  auto report = [&](size_t index, const json& r, const std::string& what) {
    if (reported++ < 10) {
      ADD_FAILURE() << "document " << index << " (" << r["kind"].get<std::string>() << "): " << what
                    << "\n  text: " << r["text"].dump().substr(0, 300);
    }
  };
  for (size_t i = 0; i < records.size(); ++i) {
    const json& r = records[i];
    const std::string text = r["text"].get<std::string>();
    const auto want = r["ids"].get<std::vector<int32_t>>();
    const auto got = tok->encode(text);
    if (got != want) {
      ++encode_diffs;
      report(i, r, "encode: " + first_difference(got, want));
    }
    const std::string decoded = tok->decode(want);
    if (decoded != r["decoded"].get<std::string>()) {
      ++decode_diffs;
      report(i, r, "decode differs from JS: " + json(decoded).dump().substr(0, 300));
    }
    // Decoding our own ids gives back the NFC form of the input.
    const std::string expected_text = r.contains("nfc") ? r["nfc"].get<std::string>() : text;
    if (tok->decode(got) != expected_text) {
      ++round_trip_diffs;
      report(i, r, "decode(encode(text)) is not NFC(text)");
    }
    if (r.contains("plain_ids")) {
      ++plain_checked;
      const auto plain_want = r["plain_ids"].get<std::vector<int32_t>>();
      const auto plain_got = tok->encode(text, /*parse_special=*/false);
      if (plain_got != plain_want) {
        ++plain_diffs;
        report(i, r, "encode(parse_special=false): " + first_difference(plain_got, plain_want));
      }
    }
  }
  EXPECT_EQ(encode_diffs, 0u);
  EXPECT_EQ(plain_diffs, 0u);
  EXPECT_EQ(decode_diffs, 0u);
  EXPECT_EQ(round_trip_diffs, 0u);
  EXPECT_GT(plain_checked, 100u) << "too few documents with special-token text";
}

TEST(TokenizerOracle, DecodeOfRandomIdsMatchesJs) {
  auto tok = test::qwen3_tokenizer();
  ASSERT_TRUE(tok);
  auto records = read_jsonl(test::oracle_dir() + "/decode.jsonl");
  ASSERT_GE(records.size(), 100u);
  size_t replaced = 0;
  for (const auto& r : records) {
    const auto ids = r["ids"].get<std::vector<int32_t>>();
    const std::string want = r["text"].get<std::string>();
    EXPECT_EQ(tok->decode(ids), want) << r["ids"].dump();
    EXPECT_EQ(tok->decode(ids, /*skip_special=*/true), r["text_skip_special"].get<std::string>())
        << r["ids"].dump();
    if (want.find("\xEF\xBF\xBD") != std::string::npos) ++replaced;
  }
  EXPECT_GT(replaced, 50u) << "the random cases should exercise U+FFFD replacement";
}

// Streaming the same random ids gives exactly decode()'s text, in valid UTF-8 chunks.
TEST(TokenizerOracle, StreamDecoderMatchesDecode) {
  auto tok = test::qwen3_tokenizer();
  ASSERT_TRUE(tok);
  auto records = read_jsonl(test::oracle_dir() + "/decode.jsonl");
  ASSERT_FALSE(records.empty());
  for (bool skip : {false, true}) {
    for (const auto& r : records) {
      const auto ids = r["ids"].get<std::vector<int32_t>>();
      StreamDecoder stream(tok, skip);
      std::string joined;
      for (int32_t id : ids) {
        std::string chunk = stream.push(id);
        EXPECT_NO_THROW(tok->encode(chunk)) << "chunk is not valid UTF-8";
        joined += chunk;
      }
      joined += stream.flush();
      EXPECT_EQ(joined, tok->decode(ids, skip)) << r["ids"].dump();
    }
  }
}

}  // namespace
}  // namespace qwen3
