// Behaviour of the tokenizer beyond the oracle comparison: special tokens vs
// parse_special=false, invalid input, unknown ids, streaming, added-token
// flags (on a small synthetic tokenizer.json), and loader error messages.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <thread>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "test_paths.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace qwen3 {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

template <typename F>
Error expect_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected qwen3::Error";
  return Error("none");
}

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

int32_t byte_token(const Tokenizer& tok, uint8_t b) {
  return *tok.token_to_id(byte_level::encode(std::string(1, static_cast<char>(b))));
}

// ---------------------------------------------------------------- real Qwen3 files

TEST(Tokenizer, VocabularyAndSpecialIds) {
  auto tok = test::qwen3_tokenizer();
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->vocab_size(), 151669);
  EXPECT_EQ(tok->eos_token_id(), tok->token_to_id("<|im_end|>"));
  EXPECT_EQ(tok->pad_token_id(), tok->token_to_id("<|endoftext|>"));
  EXPECT_TRUE(tok->is_special(*tok->token_to_id("<|im_start|>")));
  EXPECT_FALSE(tok->is_special(*tok->token_to_id("<think>")));  // added but not special
  EXPECT_FALSE(tok->is_special(*tok->token_to_id("hello")));
  EXPECT_FALSE(tok->token_to_id("no such token").has_value());
  const int32_t the = *tok->token_to_id("\xC4\xA0the");  // "Ġthe"
  EXPECT_EQ(tok->piece(the), "\xC4\xA0the");
  EXPECT_EQ(tok->token_bytes(the), " the");
  EXPECT_EQ(tok->token_bytes(*tok->token_to_id("<|im_end|>")), "<|im_end|>");
}

TEST(Tokenizer, SpecialTokensInlineVersusPlainText) {
  auto tok = test::qwen3_tokenizer();
  ASSERT_TRUE(tok);
  const int32_t im_start = *tok->token_to_id("<|im_start|>");
  const int32_t im_end = *tok->token_to_id("<|im_end|>");
  const int32_t think = *tok->token_to_id("<think>");
  const std::string text = "<|im_start|>user\nhi<|im_end|> <think>x</think>";

  auto parsed = tok->encode(text);
  EXPECT_EQ(parsed.front(), im_start);
  EXPECT_TRUE(contains(parsed, im_end));
  EXPECT_TRUE(contains(parsed, think));

  auto plain = tok->encode(text, /*parse_special=*/false);
  for (int32_t id : plain) EXPECT_FALSE(tok->is_special(id)) << "special id " << id << " in plain encoding";
  EXPECT_GT(plain.size(), parsed.size());
  // Non-special added tokens (<think>) are still recognised, as in HF.
  EXPECT_TRUE(contains(plain, think));
  // Both decode back to the same text.
  EXPECT_EQ(tok->decode(parsed), text);
  EXPECT_EQ(tok->decode(plain), text);
  EXPECT_EQ(tok->decode(parsed, /*skip_special=*/true), "user\nhi <think>x</think>");
}

TEST(Tokenizer, RejectsInvalidUtf8) {
  auto tok = test::qwen3_tokenizer();
  ASSERT_TRUE(tok);
  const std::vector<std::string> bad = {
      std::string("abc\x80", 4),             // lone continuation byte
      std::string("\xC0\x80", 2),            // overlong NUL
      std::string("\xE0\x80\xAF", 3),        // overlong '/'
      std::string("\xED\xA0\x80", 3),        // UTF-16 surrogate
      std::string("\xF4\x90\x80\x80", 4),    // above U+10FFFF
      std::string("\xF5\x80\x80\x80", 4),    // invalid lead byte
      std::string("ok \xE2\x82", 5),         // truncated at the end
      std::string("\xFF", 1),
  };
  for (const auto& s : bad) {
    Error e = expect_error([&] { tok->encode(s); });
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("UTF-8"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(tok->encode(std::string("nul \0 inside", 12)));
  EXPECT_TRUE(tok->encode("").empty());
}

TEST(Tokenizer, RejectsUnknownIds) {
  auto tok = test::qwen3_tokenizer();
  ASSERT_TRUE(tok);
  for (int32_t id : {-1, tok->vocab_size(), 151935, 1 << 30}) {
    std::vector<int32_t> ids{100, id};
    EXPECT_EQ(expect_error([&] { tok->decode(ids); }).kind(), ErrorKind::invalid_argument);
    EXPECT_EQ(expect_error([&] { tok->piece(id); }).kind(), ErrorKind::invalid_argument);
    EXPECT_EQ(expect_error([&] { tok->token_bytes(id); }).kind(), ErrorKind::invalid_argument);
    EXPECT_FALSE(tok->is_special(id));
    StreamDecoder stream(tok);
    EXPECT_EQ(expect_error([&] { stream.push(id); }).kind(), ErrorKind::invalid_argument);
  }
}

TEST(Tokenizer, DecodeReplacesInvalidSequences) {
  auto tok = test::qwen3_tokenizer();
  ASSERT_TRUE(tok);
  // E2 82 is an unfinished euro sign, then 'A': one U+FFFD for the maximal subpart.
  std::vector<int32_t> ids{byte_token(*tok, 0xE2), byte_token(*tok, 0x82), *tok->token_to_id("A")};
  EXPECT_EQ(tok->decode(ids), "\xEF\xBF\xBD" "A");
  std::vector<int32_t> two_bad{byte_token(*tok, 0x80), byte_token(*tok, 0xFF)};
  EXPECT_EQ(tok->decode(two_bad), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(StreamDecoder, HoldsMultiByteCharactersSplitAcrossTokens) {
  auto tok = test::qwen3_tokenizer();
  ASSERT_TRUE(tok);
  StreamDecoder stream(tok);
  // "é" = C3 A9 as two byte tokens.
  EXPECT_EQ(stream.push(byte_token(*tok, 0xC3)), "");
  EXPECT_EQ(stream.push(byte_token(*tok, 0xA9)), "\xC3\xA9");
  // "😀" = F0 9F 98 80, one byte per token, preceded by a whole word.
  EXPECT_EQ(stream.push(*tok->token_to_id("Hi")), "Hi");
  EXPECT_EQ(stream.push(byte_token(*tok, 0xF0)), "");
  EXPECT_EQ(stream.push(byte_token(*tok, 0x9F)), "");
  EXPECT_EQ(stream.push(byte_token(*tok, 0x98)), "");
  EXPECT_EQ(stream.push(byte_token(*tok, 0x80)), "\xF0\x9F\x98\x80");
  EXPECT_EQ(stream.flush(), "");
  // A character that never completes comes out as U+FFFD at flush...
  EXPECT_EQ(stream.push(byte_token(*tok, 0xE4)), "");
  EXPECT_EQ(stream.push(byte_token(*tok, 0xB8)), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");
  // ...or as soon as a byte shows it cannot complete.
  EXPECT_EQ(stream.push(byte_token(*tok, 0xE4)), "");
  EXPECT_EQ(stream.push(*tok->token_to_id("A")), "\xEF\xBF\xBD" "A");
}

TEST(StreamDecoder, StreamsRealTextTokenByToken) {
  auto tok = test::qwen3_tokenizer();
  ASSERT_TRUE(tok);
  const std::string text = "多语言 🇯🇵 emoji 👨‍👩‍👧 and ünïcödé <|im_end|> done";
  auto ids = tok->encode(text);
  for (bool skip : {false, true}) {
    StreamDecoder stream(tok, skip);
    std::string joined;
    for (int32_t id : ids) {
      std::string chunk = stream.push(id);
      EXPECT_NO_THROW(tok->encode(chunk));  // every chunk is valid UTF-8
      joined += chunk;
    }
    joined += stream.flush();
    EXPECT_EQ(joined, tok->decode(ids, skip));
  }
}

TEST(Tokenizer, LongInputsDoNotBlowUp) {
  auto tok = test::qwen3_tokenizer();
  ASSERT_TRUE(tok);
  const std::vector<std::string> inputs = {
      std::string(1 << 20, ' '),
      std::string(200000, 'a'),
      std::string(100000, '\n') + "x",
      [] { std::string s; for (int i = 0; i < 50000; ++i) s += " \t\r\n"; return s; }(),
      [] { std::string s; for (int i = 0; i < 20000; ++i) s += "\xE4\xB8\xAD"; return s; }(),
  };
  for (const auto& s : inputs) {
    auto ids = tok->encode(s);
    EXPECT_FALSE(ids.empty());
    EXPECT_LT(ids.size(), s.size());
    EXPECT_EQ(tok->decode(ids), s);
  }
}

TEST(Tokenizer, ConcurrentEncodesAgreeWithSerialOnes) {
  auto tok = test::qwen3_tokenizer();
  ASSERT_TRUE(tok);
  std::vector<std::string> docs;
  for (int i = 0; i < 200; ++i) {
    docs.push_back("Doc " + std::to_string(i * 7919) + ": the quick brown fox, \xE4\xBD\xA0\xE5\xA5\xBD " +
                   std::string(static_cast<size_t>(i % 13), ' ') + "it'LL jump <|im_end|>\n" +
                   std::to_string(i * i));
  }
  std::vector<std::vector<int32_t>> serial;
  for (const auto& d : docs) serial.push_back(tok->encode(d));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < docs.size(); ++i) {
          size_t k = (i * (t + 1) + round) % docs.size();
          if (tok->encode(docs[k]) != serial[k]) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

// The Split regex keeps Oniguruma's meaning of \s (Unicode White_Space), which
// includes U+0085 and excludes U+180E, as HF does.
TEST(PreTokenizer, WhitespaceClassIsUnicodeWhiteSpace) {
  const json j = json::parse(test::read_file(test::tokenizer_dir() + "/tokenizer.json"));
  const std::string pattern = j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"];
  PreTokenizer pre(pattern, "tokenizer.json");
  auto split = [&](const std::string& s) {
    std::vector<std::string> pieces;
    pre.split(s, [&](std::string_view p) { pieces.emplace_back(p); });
    return pieces;
  };
  EXPECT_EQ(split("a\xC2\x85\xC2\x85" "b"), (std::vector<std::string>{"a", "\xC2\x85", "\xC2\x85" "b"}));
  EXPECT_EQ(split("a\xE1\xA0\x8E\xE1\xA0\x8E" "b"),
            (std::vector<std::string>{"a", "\xE1\xA0\x8E\xE1\xA0\x8E", "b"}));
  EXPECT_EQ(split("I'LL  go\n\n"), (std::vector<std::string>{"I", "'LL", " ", " go", "\n\n"}));
  EXPECT_EQ(split("x 123"), (std::vector<std::string>{"x", " ", "1", "2", "3"}));
  // (?i:'s|...) folds case the Unicode way, so the long s (U+017F) counts as 's.
  EXPECT_EQ(split("x'\xC5\xBF"), (std::vector<std::string>{"x", "'\xC5\xBF"}));
  EXPECT_EQ(PreTokenizer::translate_pattern("\\s+(?!\\S)|[^\\s\\p{L}]"),
            "[\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
            "\\x{205F}\\x{3000}]+(?![^\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}"
            "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}])|[^\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}"
            "\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\p{L}]");
}

// ---------------------------------------------------------------- synthetic tokenizer.json

// A byte-level BPE with a few merges and added tokens using every flag.
class SyntheticTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("qwen3_tok_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[byte_level::encode(std::string(1, static_cast<char>(b)))] = b;
    json merges = json::array();
    int next = 256;
    for (auto [l, r] : std::vector<std::pair<std::string, std::string>>{
             {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"\xC4\xA0", "w"}}) {
      merges.push_back({l, r});
      vocab[l + r] = next++;
    }
    tokenizer_ = {
        {"version", "1.0"},
        {"normalizer", {{"type", "NFC"}}},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", qwen3_pattern()}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
        {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}},
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", false}}},
        {"added_tokens",
         {added(300, "<L>", "lstrip"), added(301, "<R>", "rstrip"), added(302, "[w]", "single_word"),
          added(303, "<S>", "special"), added(304, "\xC3\xA9", "normalized")}},
    };
    config_ = {{"chat_template", "{{ messages }}"}, {"eos_token", "<S>"}};
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string qwen3_pattern() {
    static const std::string p = [] {
      json j = json::parse(test::read_file(test::tokenizer_dir() + "/tokenizer.json"));
      return j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"].get<std::string>();
    }();
    return p;
  }
  static json added(int id, const std::string& content, const std::string& flag) {
    json t = {{"id", id},          {"content", content}, {"single_word", false}, {"lstrip", false},
              {"rstrip", false},   {"normalized", false}, {"special", false}};
    t[flag] = true;
    return t;
  }
  std::shared_ptr<const Tokenizer> load() {
    std::ofstream(dir_ / "tokenizer.json") << tokenizer_.dump();
    std::ofstream(dir_ / "tokenizer_config.json") << config_.dump();
    return Tokenizer::load(dir_.string());
  }
  Error load_error() {
    return expect_error([&] { load(); });
  }
  static std::vector<int32_t> bytes_of(const std::string& s) {
    std::vector<int32_t> ids;
    for (unsigned char c : s) ids.push_back(c);
    return ids;
  }

  fs::path dir_;
  json tokenizer_;
  json config_;
};

TEST_F(SyntheticTokenizer, BpeMergesByRank) {
  auto tok = load();
  const int32_t hello = *tok->token_to_id("hello");
  EXPECT_EQ(tok->encode("hello"), (std::vector<int32_t>{hello}));
  EXPECT_EQ(tok->encode("hellx"), (std::vector<int32_t>{*tok->token_to_id("hell"), 'x'}));
  EXPECT_EQ(tok->encode("hel"), (std::vector<int32_t>{*tok->token_to_id("he"), 'l'}));
  EXPECT_EQ(tok->encode(" w"), (std::vector<int32_t>{*tok->token_to_id("\xC4\xA0w")}));
  EXPECT_EQ(tok->vocab_size(), 305);
  EXPECT_EQ(tok->eos_token_id(), 303);
}

TEST_F(SyntheticTokenizer, AddedTokenFlagsBehaveLikeHf) {
  auto tok = load();
  // lstrip swallows the whitespace on its left; rstrip the whitespace on its right.
  EXPECT_EQ(tok->encode("a  <L>b"), (std::vector<int32_t>{'a', 300, 'b'}));
  EXPECT_EQ(tok->encode("a<R> \t b"), (std::vector<int32_t>{'a', 301, 'b'}));
  // Without the flags the spaces stay: "<R>" has none on the left.
  EXPECT_EQ(tok->encode("a <R>"), (std::vector<int32_t>{'a', *tok->token_to_id("\xC4\xA0"), 301}));
  // single_word: only when not glued to a word character.
  EXPECT_TRUE(contains(tok->encode("x [w] y"), 302));
  EXPECT_TRUE(contains(tok->encode("[w]"), 302));
  EXPECT_FALSE(contains(tok->encode("x[w] y"), 302));
  EXPECT_FALSE(contains(tok->encode("x [w]y"), 302));
  EXPECT_FALSE(contains(tok->encode("\xC3\xA9[w]"), 302));  // é is a word character
  // special: parse_special=false tokenizes it as text; non-special ones still match.
  EXPECT_EQ(tok->encode("<S>"), (std::vector<int32_t>{303}));
  EXPECT_EQ(tok->encode("<S>", false), (std::vector<int32_t>{'<', 'S', '>'}));
  EXPECT_EQ(tok->encode("<S><L>", false), (std::vector<int32_t>{'<', 'S', '>', 300}));
  EXPECT_TRUE(tok->is_special(303));
  EXPECT_FALSE(tok->is_special(300));
  // normalized: matched after NFC, so the decomposed form matches too.
  EXPECT_EQ(tok->encode("\xC3\xA9"), (std::vector<int32_t>{304}));
  EXPECT_EQ(tok->encode("e\xCC\x81"), (std::vector<int32_t>{304}));
  EXPECT_EQ(tok->encode("x\xC3\xA9y"), (std::vector<int32_t>{'x', 304, 'y'}));
}

TEST_F(SyntheticTokenizer, LegacyMergeStringsAreAccepted) {
  json merges = json::array();
  for (const auto& m : tokenizer_["model"]["merges"]) merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
  tokenizer_["model"]["merges"] = merges;
  auto tok = load();
  EXPECT_EQ(tok->encode("hello"), (std::vector<int32_t>{*tok->token_to_id("hello")}));
}

TEST_F(SyntheticTokenizer, MissingFilesNameThePath) {
  Error e = expect_error([&] { Tokenizer::load((dir_ / "nowhere").string()); });
  EXPECT_EQ(e.kind(), ErrorKind::not_found);
  EXPECT_NE(std::string(e.what()).find("nowhere/tokenizer.json"), std::string::npos) << e.what();

  std::ofstream(dir_ / "tokenizer.json") << tokenizer_.dump();
  e = expect_error([&] { Tokenizer::load(dir_.string()); });
  EXPECT_EQ(e.kind(), ErrorKind::not_found);
  EXPECT_NE(std::string(e.what()).find("tokenizer_config.json"), std::string::npos) << e.what();
}

TEST_F(SyntheticTokenizer, MalformedFilesNameFileAndKey) {
  struct Case {
    std::function<void(json&, json&)> damage;
    std::string file;
    std::string key;
  };
  const std::vector<Case> cases = {
      {[](json& t, json&) { t["model"].erase("merges"); }, "tokenizer.json", "model.merges"},
      {[](json& t, json&) { t["model"]["merges"][0] = {"h", "zzz"}; }, "tokenizer.json", "model.merges[0]"},
      {[](json& t, json&) { t["model"]["merges"][1] = 42; }, "tokenizer.json", "model.merges[1]"},
      {[](json& t, json&) { t["model"]["merges"][2] = json::array({"l"}); }, "tokenizer.json", "model.merges[2]"},
      {[](json& t, json&) { t["model"]["merges"][3] = json::array({json::array({"l"}), "l"}); }, "tokenizer.json",
       "model.merges[3]"},
      {[](json& t, json&) { t["model"]["merges"][4] = json::object({{"a", "b"}}); }, "tokenizer.json",
       "model.merges[4]"},
      {[](json& t, json&) { t["model"]["merges"][0] = "h e l"; }, "tokenizer.json", "model.merges[0]"},
      {[](json& t, json&) { t["model"]["merges"] = json::object(); }, "tokenizer.json", "model.merges"},
      {[](json& t, json&) { t["model"]["vocab"] = json::array(); }, "tokenizer.json", "model.vocab"},
      {[](json& t, json&) { t["model"]["vocab"]["b"] = json::array({1}); }, "tokenizer.json", "model.vocab[\"b\"]"},
      {[](json& t, json&) { t["model"]["vocab"].erase("a"); }, "tokenizer.json", "model.vocab"},
      {[](json& t, json&) { t["model"]["vocab"]["a"] = "x"; }, "tokenizer.json", "model.vocab[\"a\"]"},
      {[](json& t, json&) { t["model"]["type"] = "Unigram"; }, "tokenizer.json", "model.type"},
      {[](json& t, json&) { t["normalizer"] = {{"type", "NFKC"}}; }, "tokenizer.json", "normalizer.type"},
      {[](json& t, json&) { t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"; },
       "tokenizer.json", "pre_tokenizer.pretokenizers[0].pattern.Regex"},
      {[](json& t, json&) { t["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true; }, "tokenizer.json",
       "pre_tokenizer.pretokenizers[1].use_regex"},
      {[](json& t, json&) { t.erase("decoder"); }, "tokenizer.json", "decoder"},
      {[](json& t, json&) { t["added_tokens"][0].erase("content"); }, "tokenizer.json", "added_tokens[0].content"},
      {[](json& t, json&) { t["added_tokens"][1]["id"] = -5; }, "tokenizer.json", "added_tokens[1].id"},
      {[](json&, json& c) { c["chat_template"] = 7; }, "tokenizer_config.json", "chat_template"},
      {[](json&, json& c) { c["eos_token"] = "<nope>"; }, "tokenizer_config.json", "eos_token"},
  };
  const json good_tokenizer = tokenizer_, good_config = config_;
  for (const auto& c : cases) {
    tokenizer_ = good_tokenizer;
    config_ = good_config;
    c.damage(tokenizer_, config_);
    Error e = load_error();
    const std::string what = e.what();
    EXPECT_NE(what.find(c.file), std::string::npos) << what;
    EXPECT_NE(what.find("'" + c.key + "'"), std::string::npos) << "expected key " << c.key << " in: " << what;
  }
  // Two pieces with one id.
  tokenizer_ = good_tokenizer;
  config_ = good_config;
  tokenizer_["model"]["vocab"]["zz"] = 99;
  EXPECT_NE(std::string(load_error().what()).find("id 99 is used twice"), std::string::npos);
  // Not JSON at all.
  tokenizer_ = good_tokenizer;
  config_ = good_config;
  load();
  std::ofstream(dir_ / "tokenizer.json") << "{\"model\": [1, 2";
  Error e = expect_error([&] { Tokenizer::load(dir_.string()); });
  EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
  EXPECT_NE(std::string(e.what()).find("tokenizer.json: not valid JSON"), std::string::npos) << e.what();
}

TEST_F(SyntheticTokenizer, MissingChatTemplateIsAnErrorOnlyWhenUsed) {
  config_.erase("chat_template");
  auto tok = load();
  EXPECT_EQ(tok->encode("hello").size(), 1u);
  std::vector<ChatMessage> chat{{"user", "hi"}};
  Error e = expect_error([&] { tok->apply_chat_template(chat); });
  EXPECT_EQ(e.kind(), ErrorKind::failed_precondition);
  EXPECT_NE(std::string(e.what()).find("chat_template"), std::string::npos);
}

}  // namespace
}  // namespace qwen3
