// `qwen3-bpf tokenize` and `qwen3-bpf detokenize`: through the daemon, or
// offline with --model DIR (the tokenizer files of a model directory, no
// daemon needed).
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli_error.h"
#include "command.h"
#include "common/error.h"
#include "input.h"
#include "json_output.h"
#include "tokenizer/tokenizer.h"

namespace qwen3::cli {

namespace v1 = qwen3bpf::v1;

namespace {

struct Tokens {
  std::vector<int32_t> ids;
  std::vector<std::string> pieces;
};

// One way to tokenize: the daemon or a tokenizer loaded here.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual Tokens encode(const std::string& text, bool pieces, bool split_special) = 0;
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special) = 0;
};

class OfflineTokens : public TokenSource {
 public:
  explicit OfflineTokens(const std::string& dir) {
    try {
      tok_ = Tokenizer::load(dir);
    } catch (const std::exception& e) {
      throw CliError(std::string("cannot load the tokenizer of ") + dir + ": " + e.what(), kExitFailed);
    }
  }
  Tokens encode(const std::string& text, bool pieces, bool split_special) override {
    Tokens t;
    try {
      t.ids = tok_->encode(text, !split_special);
    } catch (const std::exception& e) {
      throw CliError(std::string("tokenize failed: ") + e.what(), kExitFailed);
    }
    if (pieces)
      for (int32_t id : t.ids) t.pieces.push_back(tok_->piece(id));
    return t;
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) override {
    try {
      return tok_->decode(ids, skip_special);
    } catch (const std::exception& e) {
      throw CliError(std::string("detokenize failed: ") + e.what(), kExitFailed);
    }
  }

 private:
  std::shared_ptr<const Tokenizer> tok_;
};

class DaemonTokens : public TokenSource {
 public:
  explicit DaemonTokens(DaemonClient& client) : client_(client) {}
  Tokens encode(const std::string& text, bool pieces, bool split_special) override {
    v1::TokenizeRequest req;
    req.set_text(text);
    req.set_return_pieces(pieces);
    req.set_split_special_tokens(split_special);
    v1::TokenizeResponse resp;
    grpc::ClientContext ctx;
    client_.check(client_.stub().Tokenize(&ctx, req, &resp), "tokenize");
    Tokens t;
    t.ids.assign(resp.ids().begin(), resp.ids().end());
    t.pieces.assign(resp.pieces().begin(), resp.pieces().end());
    return t;
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) override {
    v1::DetokenizeRequest req;
    for (int32_t id : ids) req.add_ids(id);
    req.set_skip_special_tokens(skip_special);
    v1::DetokenizeResponse resp;
    grpc::ClientContext ctx;
    client_.check(client_.stub().Detokenize(&ctx, req, &resp), "detokenize");
    return resp.text();
  }

 private:
  DaemonClient& client_;
};

std::unique_ptr<TokenSource> token_source(Command& cmd) {
  if (auto dir = cmd.args().get("model")) return std::make_unique<OfflineTokens>(*dir);
  return std::make_unique<DaemonTokens>(cmd.client());
}

// JSON lines in, JSON lines out; a bad line gets {"error": ...} and the exit
// code says some lines failed, but the others are still answered in order.
int tokenize_jsonl(TokenSource& source, bool pieces, bool split_special) {
  int status = kExitOk;
  std::string line;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json out;
    try {
      nlohmann::json in = nlohmann::json::parse(line);
      if (!in.is_object() || !in.contains("text") || !in["text"].is_string())
        throw CliError("line " + std::to_string(line_no) + ": want an object {\"text\": \"...\"}", kExitFailed);
      Tokens t = source.encode(in["text"].get<std::string>(), pieces, split_special);
      out["ids"] = t.ids;
      if (pieces) out["pieces"] = t.pieces;
    } catch (const nlohmann::json::exception& e) {
      out = {{"error", "line " + std::to_string(line_no) + ": not JSON: " + e.what()}};
      status = kExitFailed;
    } catch (const CliError& e) {
      // The daemon being unreachable fails every line: stop now.
      if (e.exit_code() == kExitNoDaemon || e.exit_code() == kExitPermission) throw;
      out = {{"error", e.what()}};
      status = kExitFailed;
    }
    std::cout << dump_json(out) << "\n";
  }
  std::cout << std::flush;
  return status;
}

const OptionSpec kModelOption{"model", true, false, "DIR  offline: use the tokenizer files of this model directory"};

int run_tokenize(Command& cmd) {
  const Args& a = cmd.args();
  auto source = token_source(cmd);
  const bool pieces = a.has("pieces"), split = a.has("split-special");
  if (a.has("jsonl")) {
    if (!a.positional().empty()) throw usage_error("--jsonl reads stdin; give no TEXT");
    return tokenize_jsonl(*source, pieces, split);
  }
  Tokens t = source->encode(require_utf8(text_from_args_or_stdin(a.positional(), "text"), "the text"), pieces, split);
  if (cmd.json()) {
    nlohmann::json out = {{"ids", t.ids}};
    if (pieces) out["pieces"] = t.pieces;
    std::cout << dump_json(out) << "\n";
  } else if (pieces) {
    for (size_t i = 0; i < t.ids.size(); ++i)
      std::cout << t.ids[i] << "\t" << (i < t.pieces.size() ? t.pieces[i] : "") << "\n";
  } else {
    for (size_t i = 0; i < t.ids.size(); ++i) std::cout << (i ? " " : "") << t.ids[i];
    std::cout << "\n";
  }
  return kExitOk;
}

int run_detokenize(Command& cmd) {
  const Args& a = cmd.args();
  std::vector<int32_t> ids = parse_id_list({text_from_args_or_stdin(a.positional(), "token ids")});
  auto source = token_source(cmd);
  std::string text = source->decode(ids, a.has("skip-special"));
  if (cmd.json()) {
    std::cout << dump_json({{"text", text}})
              << "\n";
  } else {
    std::cout << text << "\n";
  }
  return kExitOk;
}

}  // namespace

CommandInfo tokenize_command() {
  return CommandInfo{"tokenize",
                     "text -> token ids (--model DIR: offline; --jsonl)",
                     "tokenize [--model DIR] [--jsonl] [options] [TEXT...]",
                     "Prints the token ids of TEXT (or of stdin). With --jsonl, reads lines {\"text\": ...} on\n"
                     "stdin and writes one {\"ids\": [...]} line per input line. With --model DIR it works\n"
                     "offline, without the daemon.",
                     {kModelOption,
                      {"jsonl", false, false, "JSON lines on stdin -> JSON lines on stdout"},
                      {"pieces", false, false, "also print each token's vocabulary string"},
                      {"split-special", false, false, "treat special-token text like <|im_start|> as plain text"}},
                     run_tokenize};
}

CommandInfo detokenize_command() {
  return CommandInfo{"detokenize",
                     "token ids -> text (--model DIR: offline)",
                     "detokenize [--model DIR] [options] IDS...",
                     "Prints the text of token ids (separated by spaces or commas; stdin when none are given).\n"
                     "With --model DIR it works offline, without the daemon.",
                     {kModelOption, {"skip-special", false, false, "leave special tokens out of the text"}},
                     run_detokenize};
}

}  // namespace qwen3::cli
