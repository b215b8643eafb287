// Recursive-descent reader of the MLIR text that emit.cpp prints (see parse.h).
#include "tlaloc/stablehlo/parse.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "tlaloc/stablehlo/emit.h"
#include "tlaloc/stablehlo/parse_ast.h"

namespace tlaloc::stablehlo {
namespace detail {

void error_at(Loc loc, const std::string& msg) {
  fail("stablehlo::parse: line {} column {}: {}", loc.line, loc.column, msg);
}

namespace {

// Constants larger than this are refused (parameters carry big data, not constants).
constexpr int64_t kMaxConstantElements = int64_t(1) << 28;

bool id_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.' ||
         c == '-';
}

DType dtype_from_element(std::string_view s, Loc loc) {
  if (s == "f32") return DType::f32;
  if (s == "f64") return DType::f64;
  if (s == "bf16") return DType::bf16;
  if (s == "f16") return DType::f16;
  if (s == "i32") return DType::s32;
  if (s == "ui32") return DType::u32;
  if (s == "i1") return DType::i1;
  error_at(loc, fmt::format("unsupported element type '{}' (tlaloc reads f32 f64 bf16 f16 i32 "
                            "ui32 i1)",
                            s));
}

class Parser {
 public:
  explicit Parser(std::string_view t) : t_(t) {}

  ModuleAst module() {
    ModuleAst m;
    keyword("module");
    if (peek() == '@') m.name = symbol();
    if (try_word("attributes")) m.attrs = dict('{', '}');
    expect("{");
    keyword("func.func");
    if (!try_word("public")) try_word("private");
    Loc fl = loc();
    if (symbol() != "main") error_at(fl, "the function must be @main");
    expect("(");
    if (!try_consume(")")) {
      do {
        Argument a;
        a.loc = loc();
        a.name = ssa();
        expect(":");
        a.type = type();
        if (peek() == '{') a.attrs = dict('{', '}');
        m.args.push_back(std::move(a));
      } while (try_consume(","));
      expect(")");
    }
    if (try_consume("->")) {
      bool paren = try_consume("(");
      if (!paren || !try_consume(")")) {
        do {
          m.result_types.push_back(type());
          m.result_attrs.push_back(peek() == '{' && paren ? dict('{', '}') : AttrDict{});
        } while (paren && try_consume(","));
        if (paren) expect(")");
      }
    }
    expect("{");
    while (!try_consume("}")) m.ops.push_back(op());
    expect("}");
    skip();
    if (p_ != t_.size()) error_at(loc(), "expected the end of the text after the module");
    return m;
  }

 private:
  // ---- characters ----
  void skip() {
    while (p_ < t_.size()) {
      char c = t_[p_];
      if (c == '/' && p_ + 1 < t_.size() && t_[p_ + 1] == '/') {
        while (p_ < t_.size() && t_[p_] != '\n') advance();
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        advance();
      } else {
        break;
      }
    }
  }
  size_t advance_() { return advance(), p_ - 1; }  // advance(), returning the old position
  void advance() {
    if (t_[p_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++p_;
  }
  Loc loc() {
    skip();
    return {line_, col_};
  }
  char peek() {
    skip();
    return p_ < t_.size() ? t_[p_] : '\0';
  }
  std::string found() {
    skip();
    if (p_ >= t_.size()) return "the end of the text";
    size_t e = p_;
    while (e < t_.size() && e < p_ + 20 && !std::isspace(static_cast<unsigned char>(t_[e]))) ++e;
    return fmt::format("'{}'", t_.substr(p_, e - p_));
  }
  bool try_consume(std::string_view s) {
    skip();
    if (t_.substr(p_, s.size()) != s) return false;
    for (size_t i = 0; i < s.size(); ++i) advance();
    return true;
  }
  void expect(std::string_view s) {
    Loc l = loc();
    if (!try_consume(s)) error_at(l, fmt::format("expected '{}', found {}", s, found()));
  }
  // A bare identifier: letters, digits, _ $ . (no leading digit).
  std::string word() {
    Loc l = loc();
    size_t b = p_;
    if (p_ < t_.size() && (std::isalpha(static_cast<unsigned char>(t_[p_])) || t_[p_] == '_'))
      while (p_ < t_.size() && id_char(t_[p_]) && t_[p_] != '-') advance();
    if (b == p_) error_at(l, fmt::format("expected an identifier, found {}", found()));
    return std::string(t_.substr(b, p_ - b));
  }
  bool try_word(std::string_view w) {
    skip();
    size_t e = p_ + w.size();
    if (t_.substr(p_, w.size()) != w || (e < t_.size() && id_char(t_[e]))) return false;
    while (p_ < e) advance();
    return true;
  }
  void keyword(std::string_view w) {
    Loc l = loc();
    if (!try_word(w)) error_at(l, fmt::format("expected '{}', found {}", w, found()));
  }
  std::string string_literal() {
    expect("\"");
    std::string s;
    while (p_ < t_.size() && t_[p_] != '"') {
      if (t_[p_] == '\\' && p_ + 1 < t_.size()) {
        advance();
        char c = t_[p_];
        if (c == '"' || c == '\\') {
          s += c;
          advance();
        } else if (c == 'n') {
          s += '\n';
          advance();
        } else if (c == 't') {
          s += '\t';
          advance();
        } else if (p_ + 1 < t_.size() && std::isxdigit(static_cast<unsigned char>(c)) &&
                   std::isxdigit(static_cast<unsigned char>(t_[p_ + 1]))) {
          unsigned v = 0;
          std::from_chars(t_.data() + p_, t_.data() + p_ + 2, v, 16);
          s += char(v);
          advance();
          advance();
        } else {
          error_at(loc(), "bad escape in string literal");
        }
      } else {
        s += t_[p_];
        advance();
      }
    }
    expect("\"");
    return s;
  }
  // %name (returned with the %).
  std::string ssa() {
    Loc l = loc();
    if (peek() != '%') error_at(l, fmt::format("expected an SSA value (%name), found {}", found()));
    size_t b = p_;
    advance();
    while (p_ < t_.size() && id_char(t_[p_])) advance();
    if (p_ == b + 1) error_at(l, "empty SSA value name");
    return std::string(t_.substr(b, p_ - b));
  }
  std::string symbol() {
    expect("@");
    return peek() == '"' ? string_literal() : word();
  }
  // A number token: -?digits[.digits][e[+-]digits] or 0x hex.
  std::string number() {
    Loc l = loc();
    size_t b = p_;
    if (p_ < t_.size() && (t_[p_] == '-' || t_[p_] == '+')) advance();
    if (t_.substr(p_, 2) == "0x") {
      advance();
      advance();
      while (p_ < t_.size() && std::isxdigit(static_cast<unsigned char>(t_[p_]))) advance();
    } else {
      while (p_ < t_.size() &&
             (std::isdigit(static_cast<unsigned char>(t_[p_])) || t_[p_] == '.' || t_[p_] == 'e' ||
              t_[p_] == 'E' ||
              ((t_[p_] == '-' || t_[p_] == '+') && (t_[p_ - 1] == 'e' || t_[p_ - 1] == 'E'))))
        advance();
    }
    std::string s(t_.substr(b, p_ - b));
    if (s.empty() || s == "-" || s == "+")
      error_at(l, fmt::format("expected a number, found {}", found()));
    return s;
  }
  int64_t integer() {
    Loc l = loc();
    std::string s = number();
    int64_t v = 0;
    auto r = std::from_chars(s.data() + (s[0] == '+'), s.data() + s.size(), v);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size())
      error_at(l, fmt::format("expected an integer, found '{}'", s));
    return v;
  }

  // ---- types ----
  ir::TensorType type() {
    Loc l = loc();
    keyword("tensor");
    expect("<");
    ir::TensorType t;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      Loc dl = loc();
      size_t b = p_;
      while (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) advance();
      int64_t d = 0;
      auto r = std::from_chars(t_.data() + b, t_.data() + p_, d);
      if (r.ec != std::errc() || d > (int64_t(1) << 40))
        error_at(dl, fmt::format("dimension {} is too large", t_.substr(b, p_ - b)));
      t.shape.dims.push_back(d);
      if (p_ >= t_.size() || t_[p_] != 'x') error_at(loc(), "expected 'x' after a dimension");
      advance();
    }
    if (peek() == '?') error_at(l, "dynamic dimensions are not supported");
    t.dtype = dtype_from_element(word(), l);
    expect(">");
    return t;
  }
  std::vector<ir::TensorType> type_list() {
    std::vector<ir::TensorType> ts;
    expect("(");
    if (try_consume(")")) return ts;
    do ts.push_back(type());
    while (try_consume(","));
    expect(")");
    return ts;
  }

  // ---- attributes ----
  AttrDict dict(char open, char close) {
    AttrDict d;
    expect(std::string(1, open));
    if (try_consume(std::string(1, close))) return d;
    do {
      Loc l = loc();
      std::string k = peek() == '"' ? string_literal() : word();
      if (d.count(k)) error_at(l, fmt::format("attribute '{}' given twice", k));
      if (peek() == ',' || peek() == close) {  // a unit attribute (use_global_device_ids)
        Attr& u = d[k];
        u.kind = Attr::Bool;
        u.loc = l;
        u.i = 1;
        continue;
      }
      expect("=");
      d[k] = value();
    } while (try_consume(","));
    expect(std::string(1, close));
    return d;
  }

  Attr value() {
    Attr a;
    a.loc = loc();
    char c = peek();
    if (c == '"') {
      a.kind = Attr::Str;
      a.s = string_literal();
    } else if (c == '[') {
      a.kind = Attr::List;
      advance();
      if (++list_depth_ > 16) error_at(a.loc, "attribute lists nested deeper than 16");
      if (!try_consume("]")) {
        do a.list.push_back(value());
        while (try_consume(","));
        expect("]");
      }
      --list_depth_;
    } else if (c == '#') {
      advance();
      std::string w = word();
      expect("<");
      if (w == "stablehlo") {
        a.kind = Attr::Enum;
        a.enum_kind = word();
        a.s = word();
      } else if (w == "stablehlo.gather" || w == "stablehlo.scatter" || w == "stablehlo.dot" ||
                 w == "stablehlo.channel_handle") {
        a.kind = Attr::DimNumbers;
        a.s = w;
        if (peek() != '>') {
          do {
            Loc l = loc();
            std::string k = word();
            expect("=");
            if (a.dn.count(k)) error_at(l, fmt::format("'{}' given twice", k));
            if (try_consume("[")) {
              auto& v = a.dn[k];
              if (!try_consume("]")) {
                do v.push_back(integer());
                while (try_consume(","));
                expect("]");
              }
            } else {
              a.dn[k] = {integer()};
            }
          } while (try_consume(","));
        }
      } else if (w == "stablehlo.conv") {  // raw text up to the '>' that is not "->"
        a.kind = Attr::ConvLayout;
        while (p_ < t_.size() && (t_[p_] != '>' || t_[p_ - 1] == '-')) a.s += t_[advance_()];
      } else {
        error_at(a.loc, fmt::format("unsupported attribute #{}", w));
      }
      expect(">");
    } else if (try_word("true")) {
      a.kind = Attr::Bool;
      a.i = 1;
    } else if (try_word("false")) {
      a.kind = Attr::Bool;
      a.i = 0;
    } else if (try_word("array")) {
      a.kind = Attr::I64Array;
      expect("<");
      keyword("i64");
      if (try_consume(":")) {
        do a.ints.push_back(integer());
        while (try_consume(","));
      }
      expect(">");
    } else if (try_word("dense")) {
      a.kind = Attr::Dense;
      dense(&a);
    } else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      a.kind = Attr::Int;
      a.i = integer();
      if (try_consume(":")) {
        Loc l = loc();
        std::string t = word();
        if (t != "i64" && t != "i32") error_at(l, fmt::format("unsupported integer type {}", t));
      }
    } else {
      error_at(a.loc, fmt::format("expected an attribute value, found {}", found()));
    }
    return a;
  }

  // dense<...> : tensor<...>, decoded into an Array of that type.
  void dense(Attr* a) {
    expect("<");
    std::vector<std::string> elems;
    std::vector<int64_t> nest;  // sizes seen at each depth (first occurrence)
    std::string hex;
    bool list = false, empty = false;
    if (peek() == '"') {
      hex = string_literal();
    } else if (peek() == '>') {
      empty = true;
    } else if (peek() == '[') {
      list = true;
      elements(0, &nest, &elems);
    } else {
      elems.push_back(element());
    }
    expect(">");
    expect(":");
    Loc tl = loc();
    if (size_t e = t_.find('>', p_); e != t_.npos && t_.substr(p_, e + 1 - p_).ends_with("i64>")) {
      std::string ty;
      while (p_ <= e) ty += t_[advance_()];
      return i64_dense(a, ty, elems, nest, list, empty);
    }
    ir::TensorType t = type();
    if (t.shape.numel() > kMaxConstantElements)
      error_at(tl, fmt::format("constant {} has more than {} elements", type_text(t),
                               kMaxConstantElements));
    Array arr(t.dtype, t.shape);
    int64_t n = t.shape.numel();
    size_t w = size_of(t.dtype);
    if (!hex.empty()) {
      if (hex.size() < 2 || hex.substr(0, 2) != "0x" || (hex.size() - 2) != 2 * arr.nbytes() ||
          t.dtype == DType::i1)
        error_at(a->loc, fmt::format("hex constant has {} digits, {} needs {}", hex.size() - 2,
                                     type_text(t), 2 * arr.nbytes()));
      auto* p = static_cast<unsigned char*>(arr.raw());
      for (size_t i = 0; i < arr.nbytes(); ++i) {
        unsigned v = 0;
        auto r = std::from_chars(hex.data() + 2 + 2 * i, hex.data() + 4 + 2 * i, v, 16);
        if (r.ec != std::errc() || r.ptr != hex.data() + 4 + 2 * i)
          error_at(a->loc,
                   fmt::format("bad hex digits '{}' in constant", hex.substr(2 + 2 * i, 2)));
        p[i] = static_cast<unsigned char>(v);
      }
    } else if (empty) {
      if (n != 0) error_at(a->loc, fmt::format("dense<> for {} elements", n));
    } else if (!list || (elems.size() == 1 && n == 1 && nest.empty())) {
      std::vector<unsigned char> one(w);
      decode_element(elems[0], t.dtype, one.data(), a->loc);
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(static_cast<unsigned char*>(arr.raw()) + size_t(i) * w, one.data(), w);
    } else {
      if (nest != t.shape.dims || int64_t(elems.size()) != n)
        error_at(tl, fmt::format("constant has {} elements in nesting [{}] but the type is {}",
                                 elems.size(), fmt::join(nest, ","), type_text(t)));
      for (int64_t i = 0; i < n; ++i)
        decode_element(elems[size_t(i)], t.dtype,
                       static_cast<unsigned char*>(arr.raw()) + size_t(i) * w, a->loc);
    }
    a->dense = std::make_shared<const Array>(std::move(arr));
  }
  void elements(size_t depth, std::vector<int64_t>* nest, std::vector<std::string>* out) {
    Loc l = loc();
    if (depth > 64) error_at(l, "constant list nested deeper than 64");
    expect("[");
    int64_t count = 0;
    if (peek() != ']') {
      do {
        if (peek() == '[')
          elements(depth + 1, nest, out);
        else
          out->push_back(element());
        ++count;
      } while (try_consume(","));
    }
    expect("]");
    if (nest->size() <= depth) nest->resize(depth + 1, -1);
    if ((*nest)[depth] == -1) (*nest)[depth] = count;
    if ((*nest)[depth] != count) error_at(l, "ragged constant list");
  }
  std::string element() {
    if (try_word("true")) return "true";
    if (try_word("false")) return "false";
    return number();
  }

  // ---- ops ----
  OpAst op() {
    OpAst o;
    o.loc = loc();
    if (peek() == '%') {
      o.result = ssa();
      expect("=");
    }
    if (peek() != '"')
      error_at(loc(), fmt::format("expected an op in generic form (\"stablehlo.name\"), found {}",
                                  found()));
    o.name = string_literal();
    expect("(");
    if (!try_consume(")")) {
      do {
        o.operand_locs.push_back(loc());
        o.operands.push_back(ssa());
      } while (try_consume(","));
      expect(")");
    }
    if (try_consume("<")) {
      o.attrs = dict('{', '}');
      expect(">");
    }
    if (try_consume("(")) {
      if (region_depth_ > 0) error_at(o.loc, "nested regions are not supported");
      o.has_region = true;
      block(o.block_args, o.block_arg_types, o.region);
      if (try_consume(",")) {  // select_and_scatter: the second (scatter) region
        o.has_region2 = true;
        block(o.block_args2, o.block_arg_types2, o.region2);
      }
      expect(")");
    }
    if (peek() == '{')
      for (auto& [k, v] : dict('{', '}')) {
        if (o.attrs.count(k)) error_at(v.loc, fmt::format("attribute '{}' given twice", k));
        o.attrs[k] = v;
      }
    expect(":");
    o.operand_types = type_list();
    expect("->");
    if (peek() == '(')
      o.result_types = type_list();
    else
      o.result_types.push_back(type());
    return o;
  }

  // One region of one block: { ^bb0(%a: type, ...): ops }.
  void block(std::vector<std::string>& args, std::vector<ir::TensorType>& types,
             std::vector<OpAst>& ops) {
    expect("{");
    expect("^");
    word();
    expect("(");
    do {
      args.push_back(ssa());
      expect(":");
      types.push_back(type());
    } while (try_consume(","));
    expect(")");
    expect(":");
    ++region_depth_;
    while (!try_consume("}")) ops.push_back(op());
    --region_depth_;
  }

  std::string_view t_;
  int region_depth_ = 0, list_depth_ = 0;
  size_t p_ = 0;
  int line_ = 1, col_ = 1;
};

}  // namespace

ModuleAst parse_module(std::string_view text) { return Parser(text).module(); }

}  // namespace detail

ir::Function parse(std::string_view text) {
  return detail::build_function(detail::parse_module(text));
}

}  // namespace tlaloc::stablehlo
