#include "json_output.h"

#include <google/protobuf/descriptor.h>

#include <cctype>
#include <charconv>
#include <cstdlib>

namespace qwen3::cli {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// "FinishReason" -> "FINISH_REASON_"
std::string enum_prefix(const std::string& type_name) {
  std::string out;
  for (size_t i = 0; i < type_name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(type_name[i]);
    if (i > 0 && std::isupper(c)) out += '_';
    out += static_cast<char>(std::toupper(c));
  }
  return out + "_";
}

// A float as the shortest decimal that reads back as the same float (0.1f is
// 0.1, not 0.10000000149011612).
nlohmann::json float_value(float f) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, f);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

nlohmann::json enum_value(const google::protobuf::EnumValueDescriptor& v) {
  std::string word = enum_word(v);
  return word.empty() ? nlohmann::json(nullptr) : nlohmann::json(word);
}

nlohmann::json field_value(const Message& m, const Reflection& r, const FieldDescriptor& f, int index) {
  const bool rep = index >= 0;
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return rep ? r.GetRepeatedInt32(m, &f, index) : r.GetInt32(m, &f);
    case FieldDescriptor::CPPTYPE_INT64: return rep ? r.GetRepeatedInt64(m, &f, index) : r.GetInt64(m, &f);
    case FieldDescriptor::CPPTYPE_UINT32: return rep ? r.GetRepeatedUInt32(m, &f, index) : r.GetUInt32(m, &f);
    case FieldDescriptor::CPPTYPE_UINT64: return rep ? r.GetRepeatedUInt64(m, &f, index) : r.GetUInt64(m, &f);
    case FieldDescriptor::CPPTYPE_DOUBLE: return rep ? r.GetRepeatedDouble(m, &f, index) : r.GetDouble(m, &f);
    case FieldDescriptor::CPPTYPE_FLOAT: return float_value(rep ? r.GetRepeatedFloat(m, &f, index) : r.GetFloat(m, &f));
    case FieldDescriptor::CPPTYPE_BOOL: return rep ? r.GetRepeatedBool(m, &f, index) : r.GetBool(m, &f);
    case FieldDescriptor::CPPTYPE_ENUM: return enum_value(rep ? *r.GetRepeatedEnum(m, &f, index) : *r.GetEnum(m, &f));
    case FieldDescriptor::CPPTYPE_STRING: return rep ? r.GetRepeatedString(m, &f, index) : r.GetString(m, &f);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return to_json_value(rep ? r.GetRepeatedMessage(m, &f, index) : r.GetMessage(m, &f));
  }
  return nullptr;
}

}  // namespace

std::string enum_word(const google::protobuf::EnumValueDescriptor& value) {
  std::string name = value.name();
  const std::string prefix = enum_prefix(value.type()->name());
  if (name.compare(0, prefix.size(), prefix) == 0) name = name.substr(prefix.size());
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (value.number() == 0 && name == "unspecified") return "";
  return name;
}

nlohmann::json to_json_value(const Message& m) {
  const auto* d = m.GetDescriptor();
  const Reflection* r = m.GetReflection();
  nlohmann::json out = nlohmann::json::object();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) {
      nlohmann::json arr = nlohmann::json::array();
      for (int k = 0; k < r->FieldSize(m, f); ++k) arr.push_back(field_value(m, *r, *f, k));
      out[f->name()] = std::move(arr);
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !r->HasField(m, f)) {
      continue;  // an absent sub-message is left out, as protobuf's printer does
    } else {
      out[f->name()] = field_value(m, *r, *f, -1);
    }
  }
  return out;
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string to_json(const Message& m) { return dump_json(to_json_value(m)); }

}  // namespace qwen3::cli
