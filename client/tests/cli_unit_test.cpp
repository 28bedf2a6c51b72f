// Unit tests of the CLI's own logic: argument parsing, id lists, the
// hand-encoded health check messages, and the human-readable formats.
#include <gtest/gtest.h>

#include "args.h"
#include "cli_error.h"
#include "format.h"
#include "health_check.h"

namespace qwen3::cli {
namespace {

const std::vector<OptionSpec> kSpecs{
    {"seed", true, false, "N  seed"},
    {"stop", true, true, "TEXT  stop string"},
    {"json", false, false, "json"},
    {"top-p", true, false, "P  cut"},
};

int usage_exit(const std::vector<std::string>& argv) {
  try {
    Args::parse(argv, kSpecs);
  } catch (const CliError& e) {
    return e.exit_code();
  }
  return -1;
}

TEST(Args, OptionsAnywhereAndBothValueForms) {
  Args a = Args::parse({"hello", "--seed", "7", "world", "--stop=x", "--stop", "y", "--json"}, kSpecs);
  EXPECT_EQ(a.positional(), (std::vector<std::string>{"hello", "world"}));
  EXPECT_EQ(a.get_int("seed", 0, 100), 7);
  EXPECT_EQ(a.all("stop"), (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(a.has("json"));
  EXPECT_FALSE(a.has("top-p"));
  EXPECT_EQ(a.get_double("top-p", 0, 1), std::nullopt);
}

TEST(Args, DoubleDashEndsOptionsAndDashIsPositional) {
  Args a = Args::parse({"--", "--seed", "-", "-3"}, kSpecs);
  EXPECT_EQ(a.positional(), (std::vector<std::string>{"--seed", "-", "-3"}));
  EXPECT_FALSE(a.has("seed"));
}

TEST(Args, UsageErrors) {
  EXPECT_EQ(usage_exit({"--nope"}), kExitUsage);
  EXPECT_EQ(usage_exit({"--seed"}), kExitUsage);              // value missing
  EXPECT_EQ(usage_exit({"--seed", "1", "--seed", "2"}), kExitUsage);  // not repeatable
  EXPECT_EQ(usage_exit({"--json=yes"}), kExitUsage);          // flag with a value
  EXPECT_EQ(usage_exit({"--seed", "1"}), -1);
}

TEST(Args, TypedGettersCheckSyntaxAndRange) {
  auto int_exit = [](const std::string& v) {
    try {
      Args::parse({"--seed", v}, kSpecs).get_int("seed", 0, 100);
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
  auto dbl = [](const std::string& v) { return Args::parse({"--top-p", v}, kSpecs).get_double("top-p", 0, 1); };
  EXPECT_DOUBLE_EQ(*dbl("0.25"), 0.25);
  EXPECT_THROW(dbl("nan"), CliError);
  EXPECT_THROW(dbl("1.5"), CliError);
  EXPECT_THROW(dbl("inf"), CliError);
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

}  // namespace
}  // namespace qwen3::cli
