// Unit tests of the CLI's own logic: the command line (CLI11), id lists, the
// hand-encoded health check messages, JSON output, start hints, and the
// human-readable formats.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <sstream>

#include "args.h"
#include "cli_error.h"
#include "command.h"
#include "command_line.h"
#include "daemon_client.h"
#include "format.h"
#include "generation.h"
#include "health_check.h"
#include "interrupt.h"
#include "json_output.h"
#include "think_display.h"
#include "qwen3bpf/v1/qwen3bpf.pb.h"

namespace qwen3::cli {
namespace {

int run_nothing(Command&) { return 0; }

// A command table shaped like the real one: value options with short forms,
// a repeatable option, flags, positional arguments.
const std::vector<CommandInfo>& test_commands() {
  static const std::vector<CommandInfo> commands{
      {"generate", "stream", "generate [options] PROMPT...", "Generates.",
       {{"max-tokens", true, false, "N  at most N", 'n'},
        {"temperature", true, false, "T  temperature", 't'},
        {"seed", true, false, "N  seed"},
        {"stop", true, true, "TEXT  stop string"},
        {"top-p", true, false, "P  cut"},
        {"ignore-eos", false, false, "keep going"}},
       run_nothing,
       {}},
      {"status", "status", "status", "Shows.", {{"wait", false, false, "wait"}}, run_nothing, {}},
      {"sessions", "sessions", "sessions ACTION", "Sessions.", {}, run_nothing, {"session"}},
  };
  return commands;
}

struct Result {
  ParsedCommandLine parsed;
  std::string out, err;
};

Result parse(const std::vector<std::string>& argv) {
  std::ostringstream out, err;
  Result r{parse_command_line(argv, test_commands(), out, err), "", ""};
  r.out = out.str();
  r.err = err.str();
  return r;
}

// The exit code a command line ends with before running anything (-1: it runs).
int parse_exit(const std::vector<std::string>& argv) {
  try {
    Result r = parse(argv);
    return r.parsed.command ? -1 : r.parsed.exit_code;
  } catch (const CliError& e) {
    return e.exit_code();
  }
}

std::string usage_message(const std::vector<std::string>& argv) {
  try {
    parse(argv);
  } catch (const CliError& e) {
    return e.what();
  }
  return "";
}

TEST(CommandLine, GlobalOptionsBeforeOrAfterTheCommand) {
  for (const auto& argv : std::vector<std::vector<std::string>>{{"--socket", "/s", "--json", "status"},
                                                                {"status", "--json", "--socket", "/s"},
                                                                {"-s", "/s", "status", "--json"},
                                                                {"--json", "status", "-s/s"},
                                                                {"status", "--socket=/s", "--json"}}) {
    Result r = parse(argv);
    ASSERT_NE(r.parsed.command, nullptr);
    EXPECT_EQ(r.parsed.command->name, "status");
    EXPECT_EQ(r.parsed.args.get("socket"), "/s");
    EXPECT_TRUE(r.parsed.args.has("json"));
    EXPECT_TRUE(r.parsed.args.positional().empty());
  }
}

TEST(CommandLine, ShortFormsAndOptionsAmongTheWords) {
  Result r = parse({"generate", "-n", "5", "hello", "-t", "0.7", "world", "--stop=x", "--stop", "y", "--ignore-eos"});
  ASSERT_NE(r.parsed.command, nullptr);
  const Args& a = r.parsed.args;
  EXPECT_EQ(a.positional(), (std::vector<std::string>{"hello", "world"}));
  EXPECT_EQ(a.get_int("max-tokens", 1, 100), 5);
  EXPECT_DOUBLE_EQ(*a.get_double("temperature", 0, 2), 0.7);
  EXPECT_EQ(a.all("stop"), (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(a.has("ignore-eos"));
  EXPECT_FALSE(a.has("top-p"));
  EXPECT_EQ(a.get_double("top-p", 0, 1), std::nullopt);
  EXPECT_EQ(parse({"generate", "--max-tokens=7", "x"}).parsed.args.get("max-tokens"), "7");
  EXPECT_EQ(parse({"generate", "-n7", "x"}).parsed.args.get("max-tokens"), "7");
}

TEST(CommandLine, DoubleDashEndsOptionsDashAndNegativeNumbersArePositional) {
  Result r = parse({"generate", "--", "-n", "5", "--seed"});
  ASSERT_NE(r.parsed.command, nullptr);
  EXPECT_EQ(r.parsed.args.positional(), (std::vector<std::string>{"-n", "5", "--seed"}));
  EXPECT_FALSE(r.parsed.args.has("max-tokens"));
  r = parse({"generate", "-", "-3"});
  EXPECT_EQ(r.parsed.args.positional(), (std::vector<std::string>{"-", "-3"}));
  // Once the command is known, command names are words of the prompt.
  r = parse({"generate", "status", "help", "sessions"});
  EXPECT_EQ(r.parsed.command->name, "generate");
  EXPECT_EQ(r.parsed.args.positional(), (std::vector<std::string>{"status", "help", "sessions"}));
}

TEST(CommandLine, UsageErrorsAreExitTwoNeverPromptText) {
  EXPECT_EQ(parse_exit({"generate", "-x", "hi"}), kExitUsage);
  EXPECT_EQ(parse_exit({"generate", "--nope"}), kExitUsage);
  EXPECT_EQ(parse_exit({"generate", "--seed"}), kExitUsage);                    // value missing
  EXPECT_EQ(parse_exit({"generate", "--seed", "1", "--seed", "2"}), kExitUsage);  // not repeatable
  EXPECT_EQ(parse_exit({"generate", "--ignore-eos=yes"}), kExitUsage);            // flag with a value
  EXPECT_EQ(parse_exit({"frobnicate"}), kExitUsage);
  EXPECT_EQ(parse_exit({}), kExitUsage);
  EXPECT_EQ(parse_exit({"generate", "--seed", "1"}), -1);
  EXPECT_NE(usage_message({"generate", "-x", "hi"}).find("unknown option -x"), std::string::npos)
      << usage_message({"generate", "-x", "hi"});
  EXPECT_NE(usage_message({"frobnicate"}).find("unknown command 'frobnicate'"), std::string::npos);
  EXPECT_NE(usage_message({"generate", "--seed"}).find("--seed needs a value"), std::string::npos);
  EXPECT_NE(usage_message({"generate", "--seed", "1", "--seed", "2"}).find("more than once"), std::string::npos);
  EXPECT_NE(usage_message({"generate", "--ignore-eos=yes"}).find("takes no value"), std::string::npos);
}

TEST(CommandLine, HelpCmdEqualsCmdHelpAndVersion) {
  const std::string help = parse({"generate", "--help"}).out;
  EXPECT_NE(help.find("usage: qwen3-bpf generate"), std::string::npos);
  EXPECT_NE(help.find("-n, --max-tokens N"), std::string::npos) << help;
  EXPECT_NE(help.find("-s, --socket PATH"), std::string::npos) << help;
  EXPECT_EQ(parse({"help", "generate"}).out, help);
  EXPECT_EQ(parse({"generate", "-h"}).out, help);
  EXPECT_EQ(parse({"-h", "generate"}).out, help);
  EXPECT_EQ(parse({"help", "session"}).out, parse({"sessions", "--help"}).out);  // aliases
  EXPECT_EQ(parse_exit({"help", "generate"}), kExitOk);
  EXPECT_EQ(parse_exit({"help", "nope"}), kExitUsage);
  const std::string top = parse({"--help"}).out;
  EXPECT_NE(top.find("commands:"), std::string::npos);
  EXPECT_EQ(parse({"help"}).out, top);
  EXPECT_EQ(parse({}).err, top);  // no command: the usage on stderr, exit 2
  EXPECT_EQ(parse({"--version"}).out.rfind("qwen3-bpf ", 0), 0u);
  EXPECT_EQ(parse_exit({"--version"}), kExitOk);
}

TEST(CommandLine, JsonWantedBeforeTheDoubleDashOnly) {
  EXPECT_TRUE(argv_wants_json({"generate", "--json", "x"}));
  EXPECT_FALSE(argv_wants_json({"generate", "--", "--json"}));
}

TEST(Args, TypedGettersCheckSyntaxAndRange) {
  auto int_exit = [](const std::string& v) {
    Args a;
    a.add_value("seed", v);
    try {
      a.get_int("seed", 0, 100);
    } catch (const CliError& e) {
      return e.exit_code();
    }
    return 0;
  };
  EXPECT_EQ(int_exit("12"), 0);
  EXPECT_EQ(int_exit("12x"), kExitUsage);
  EXPECT_EQ(int_exit(""), kExitUsage);
  EXPECT_EQ(int_exit("101"), kExitUsage);
  EXPECT_EQ(int_exit("-1"), kExitUsage);
  EXPECT_EQ(int_exit("99999999999999999999999"), kExitUsage);
  auto dbl = [](const std::string& v) {
    Args a;
    a.add_value("top-p", v);
    return a.get_double("top-p", 0, 1);
  };
  EXPECT_DOUBLE_EQ(*dbl("0.25"), 0.25);
  EXPECT_THROW(dbl("nan"), CliError);
  EXPECT_THROW(dbl("1.5"), CliError);
  EXPECT_THROW(dbl("inf"), CliError);
}

TEST(StartHint, SystemctlOnlyWithSystemdAndTheDefaultSocket) {
  EXPECT_EQ(start_hint(kDefaultSocket, true), "; start it with: systemctl start qwen3-bpfd");
  const std::string direct = start_hint(kDefaultSocket, false);
  EXPECT_EQ(direct.find("systemctl"), std::string::npos);
  EXPECT_NE(direct.find("qwen3-bpfd [--model DIR]"), std::string::npos) << direct;
  const std::string custom = start_hint("/tmp/x.sock", true);
  EXPECT_EQ(custom.find("systemctl"), std::string::npos);
  EXPECT_NE(custom.find("qwen3-bpfd --socket /tmp/x.sock"), std::string::npos) << custom;
}

TEST(ErrorCodes, WordsForJson) {
  EXPECT_EQ(CliError("x", kExitUsage).code(), "usage");
  EXPECT_EQ(CliError("x", kExitNoDaemon).code(), "not_running");
  EXPECT_EQ(CliError("x", kExitFailed, "not_found").code(), "not_found");
}

TEST(IdList, AcceptsSpacesCommasAndBrackets) {
  EXPECT_EQ(parse_id_list({"1", "2,3", "[4, 5]", " 6\n"}), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(parse_id_list({"", " , "}).empty());
  EXPECT_THROW(parse_id_list({"1", "x"}), CliError);
  EXPECT_THROW(parse_id_list({"-1"}), CliError);
  EXPECT_THROW(parse_id_list({"4294967296"}), CliError);
}

TEST(HealthWire, RequestEncoding) {
  EXPECT_EQ(encode_health_request(""), "");
  EXPECT_EQ(encode_health_request("ab"), std::string("\x0a\x02" "ab", 4));
  std::string long_name(200, 'x');
  std::string enc = encode_health_request(long_name);
  ASSERT_EQ(enc.size(), 3u + 200u);
  EXPECT_EQ(static_cast<uint8_t>(enc[1]), 0xc8);  // 200 = 0x48 | 0x80, then 0x01
  EXPECT_EQ(static_cast<uint8_t>(enc[2]), 0x01);
}

TEST(HealthWire, ResponseDecoding) {
  EXPECT_EQ(decode_health_response(""), ServingStatus::unknown);
  EXPECT_EQ(decode_health_response(std::string("\x08\x01", 2)), ServingStatus::serving);
  EXPECT_EQ(decode_health_response(std::string("\x08\x02", 2)), ServingStatus::not_serving);
  // Unknown fields before the status are skipped.
  EXPECT_EQ(decode_health_response(std::string("\x12\x03xyz\x08\x01", 7)), ServingStatus::serving);
  // Out-of-range enum values and malformed input never crash.
  EXPECT_EQ(decode_health_response(std::string("\x08\x09", 2)), ServingStatus::unknown);
  EXPECT_EQ(decode_health_response(std::string("\x12\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11)),
            ServingStatus::unknown);
  EXPECT_EQ(decode_health_response(std::string("\x08", 1)), ServingStatus::unknown);
}

TEST(Format, BytesDurationsAndPrintable) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(uint64_t{3} << 30), "3.0 GiB");
  EXPECT_EQ(format_duration(2.5), "2.5s");
  EXPECT_EQ(format_duration(125), "2m 05s");
  EXPECT_EQ(format_duration(3 * 3600 + 61), "3h 01m 01s");
  EXPECT_EQ(format_unix_ms(0), "-");
  EXPECT_EQ(format_unix_ms(86400000), "1970-01-02 00:00:00 UTC");
  EXPECT_EQ(printable("a\nb\t\x01"), "a\\nb\\t\\x01");
  EXPECT_EQ(printable("你好"), "你好");
}

// The first Ctrl-C runs the cancel and does not exit; a second one exits 130
// at once even when that cancel did not end the request (a stuck daemon).
TEST(InterruptDeathTest, SecondCtrlCExitsAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        install_interrupt_watcher();
        std::atomic<int> cancels{0};
        CancelOnInterrupt guard([&cancels] { ++cancels; });
        kill(getpid(), SIGINT);
        for (int i = 0; i < 500 && cancels == 0; ++i) usleep(10000);
        if (cancels != 1 || !guard.interrupted()) _exit(1);
        usleep(100000);  // still alive after the first press
        kill(getpid(), SIGINT);
        sleep(10);
        _exit(2);
      },
      testing::ExitedWithCode(kExitInterrupted), "interrupted");
}

TEST(JsonOutput, EnumsAsWordsAnd64BitNumbersAsNumbers) {
  namespace v1 = qwen3bpf::v1;
  v1::GenerateResponse m;
  m.set_finish_reason(v1::FINISH_REASON_STOP_SEQUENCE);
  m.set_seed(uint64_t{1} << 60);
  m.mutable_logprobs()->set_logprob(-0.1f);
  nlohmann::json j = to_json_value(m);
  EXPECT_EQ(j["finish_reason"], "stop_sequence");
  ASSERT_TRUE(j["seed"].is_number_unsigned()) << j.dump();
  EXPECT_EQ(j["seed"].get<uint64_t>(), uint64_t{1} << 60);
  EXPECT_EQ(j["logprobs"]["logprob"].dump(), "-0.1");  // a float as the float's shortest decimal
  EXPECT_EQ(j["token_id"], 0);            // scalars present even when zero
  EXPECT_FALSE(j.contains("usage"));      // absent sub-messages left out
  m.set_finish_reason(v1::FINISH_REASON_UNSPECIFIED);
  EXPECT_TRUE(to_json_value(m)["finish_reason"].is_null());  // not the last message
  const auto* fr = v1::FinishReason_descriptor();
  EXPECT_EQ(enum_word(*fr->FindValueByNumber(v1::FINISH_REASON_LENGTH)), "length");
  EXPECT_EQ(enum_word(*fr->FindValueByNumber(v1::FINISH_REASON_EOS)), "eos");
  EXPECT_EQ(enum_word(*fr->FindValueByNumber(v1::FINISH_REASON_CANCELLED)), "cancelled");
  EXPECT_EQ(enum_word(*v1::Decision_descriptor()->FindValueByNumber(v1::DECISION_PASS)), "pass");
  EXPECT_EQ(enum_word(*v1::Stage_descriptor()->FindValueByNumber(v1::STAGE_VERIFY)), "verify");
  EXPECT_EQ(enum_word(*v1::LoadState_descriptor()->FindValueByNumber(v1::LOAD_STATE_READY)), "ready");
  v1::SessionInfo s;
  s.set_created_unix_ms(1764547200123);
  EXPECT_EQ(to_json_value(s)["created_unix_ms"].get<int64_t>(), 1764547200123);
}

// Issue 24: each sampling flag sets its own field only (set_fields), so the
// daemon keeps the model's defaults for the rest; --seed alone used to send
// temperature 0 (greedy).
qwen3bpf::v1::GenerateRequest request_of(const std::vector<std::string>& argv) {
  std::ostringstream out, err;
  ParsedCommandLine p = parse_command_line(argv, {generate_command()}, out, err);
  EXPECT_NE(p.command, nullptr) << err.str();
  qwen3bpf::v1::GenerateRequest req;
  apply_generation_options(p.args, req);
  return req;
}

std::vector<std::string> set_fields(const qwen3bpf::v1::GenerateRequest& r) {
  return {r.sampling().set_fields().begin(), r.sampling().set_fields().end()};
}

TEST(GenerationOptions, EachFlagSetsOnlyItsField) {
  EXPECT_FALSE(request_of({"generate", "x"}).has_sampling());
  EXPECT_FALSE(request_of({"generate", "-n", "5", "x"}).has_sampling());
  const auto seeded = request_of({"generate", "--seed", "42", "x"});
  EXPECT_EQ(set_fields(seeded), std::vector<std::string>{"seed"});
  EXPECT_EQ(seeded.sampling().seed(), 42u);
  const auto greedy = request_of({"generate", "--greedy", "x"});
  EXPECT_EQ(set_fields(greedy), std::vector<std::string>{"temperature"});
  EXPECT_EQ(greedy.sampling().temperature(), 0.0f);
  const auto two = request_of({"generate", "--top-k", "0", "--repetition-penalty", "1", "x"});
  EXPECT_EQ(set_fields(two), (std::vector<std::string>{"top_k", "repetition_penalty"}));
  std::ostringstream out, err;
  ParsedCommandLine p = parse_command_line({"generate", "--greedy", "-t", "0.5", "x"}, {generate_command()}, out, err);
  qwen3bpf::v1::GenerateRequest req;
  try {
    apply_generation_options(p.args, req);
    ADD_FAILURE() << "--greedy with --temperature accepted";
  } catch (const CliError& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
  }
}

TEST(GenerationOptions, DriverChoosesWhoSteersDecoding) {
  EXPECT_EQ(request_of({"generate", "x"}).driver(), qwen3bpf::v1::DRIVER_DEFAULT);
  EXPECT_EQ(request_of({"generate", "--driver", "kernel", "x"}).driver(), qwen3bpf::v1::DRIVER_KERNEL);
  EXPECT_EQ(request_of({"generate", "--driver", "user", "x"}).driver(), qwen3bpf::v1::DRIVER_USER);
  EXPECT_EQ(request_of({"generate", "--driver", "auto", "x"}).driver(), qwen3bpf::v1::DRIVER_DEFAULT);
  std::ostringstream out, err;
  ParsedCommandLine p = parse_command_line({"generate", "--driver", "bpf", "x"}, {generate_command()}, out, err);
  qwen3bpf::v1::GenerateRequest req;
  try {
    apply_generation_options(p.args, req);
    ADD_FAILURE() << "--driver bpf accepted";
  } catch (const CliError& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
  }
}

std::string show(ThinkDisplay& d, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += d.push(p);
  return out + d.flush();
}

TEST(ThinkDisplay, ThinkingIsShownApartNeverAsTags) {
  const std::vector<std::string> reply = {"<think>", "\nI should", " greet.\n", "</thi", "nk>\n\n", "Hello!"};
  ThinkDisplay marked(ThinkDisplay::Style::marked);
  EXPECT_EQ(show(marked, reply), "[thinking]\nI should greet.\n[/thinking]\nHello!");
  EXPECT_EQ(marked.thinking(), "I should greet.");
  EXPECT_EQ(marked.answer(), "Hello!");
  ThinkDisplay faint(ThinkDisplay::Style::faint);
  EXPECT_EQ(show(faint, reply), "\x1b[2mI should greet.\x1b[0m\nHello!");

  ThinkDisplay empty(ThinkDisplay::Style::marked);  // thinking off: the template's empty block
  EXPECT_EQ(show(empty, {"<think>\n\n</think>\n\n", "Hi", " there"}), "Hi there");
  ThinkDisplay plain(ThinkDisplay::Style::marked);  // no tags; a '<' that starts none
  EXPECT_EQ(show(plain, {"a <", " b <th", "ing"}), "a < b <thing");
  ThinkDisplay cut(ThinkDisplay::Style::faint);  // the reply ends inside its thinking (Ctrl-C, length)
  EXPECT_EQ(show(cut, {"<think>\nhmm"}), "\x1b[2mhmm\x1b[0m\n");
}

}  // namespace
}  // namespace qwen3::cli
