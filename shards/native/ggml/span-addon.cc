// Node-API face of the ggml span (issue 32): load(base, ggml, dir), devices(), and a Span class
// whose methods mirror shards/shard.ts. Positions, session lengths and argument checks stay in
// TypeScript (shards/ggml/ggml-shard.ts); this side trusts what that side checked, except for
// the sizes of the buffers it reads and writes.
#include <napi.h>

#include <memory>

#include "span.h"

namespace {

Napi::Value Fail(Napi::Env env, const std::string& message) {
  Napi::Error::New(env, message).ThrowAsJavaScriptException();
  return env.Undefined();
}

Napi::Value Load(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsString() || !info[1].IsString() || !info[2].IsString())
    return Fail(env, "load(base: string, ggml: string, dir: string)");
  const std::string err = lsg::loadLibraries(info[0].As<Napi::String>(), info[1].As<Napi::String>(), info[2].As<Napi::String>());
  return err.empty() ? env.Null() : Napi::String::New(env, err);
}

const char* TypeName(enum ggml_backend_dev_type t) {
  switch (t) {
    case GGML_BACKEND_DEVICE_TYPE_CPU: return "cpu";
    case GGML_BACKEND_DEVICE_TYPE_GPU: return "gpu";
    case GGML_BACKEND_DEVICE_TYPE_IGPU: return "igpu";
    default: return "accel";
  }
}

Napi::Value Devices(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!lsg::librariesLoaded()) return Fail(env, "ggml libraries are not loaded");
  const size_t n = ggml_backend_dev_count();
  Napi::Array out = Napi::Array::New(env, n);
  for (size_t i = 0; i < n; i++) {
    ggml_backend_dev_t d = ggml_backend_dev_get(i);
    size_t freeBytes = 0, totalBytes = 0;
    ggml_backend_dev_memory(d, &freeBytes, &totalBytes);
    Napi::Object o = Napi::Object::New(env);
    o.Set("index", double(i));
    o.Set("name", ggml_backend_dev_name(d));
    o.Set("description", ggml_backend_dev_description(d));
    o.Set("backend", ggml_backend_reg_name(ggml_backend_dev_backend_reg(d)));
    o.Set("type", TypeName(ggml_backend_dev_type(d)));
    o.Set("freeBytes", double(freeBytes));
    o.Set("totalBytes", double(totalBytes));
    out.Set(uint32_t(i), o);
  }
  return out;
}

class SpanWrap : public Napi::ObjectWrap<SpanWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "GgmlSpan",
                       {InstanceMethod("openSession", &SpanWrap::OpenSession), InstanceMethod("closeSession", &SpanWrap::CloseSession),
                        InstanceMethod("forward", &SpanWrap::Forward), InstanceMethod("exportKv", &SpanWrap::ExportKv),
                        InstanceMethod("importKv", &SpanWrap::ImportKv), InstanceMethod("close", &SpanWrap::Close),
                        InstanceMethod("info", &SpanWrap::Info)});
  }

  explicit SpanWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<SpanWrap>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsObject()) {
      Fail(env, "new GgmlSpan(config)");
      return;
    }
    Napi::Object o = info[0].As<Napi::Object>();
    auto num = [&](const char* k) { return o.Get(k).As<Napi::Number>(); };
    lsg::SpanConfig c;
    c.path = o.Get("path").As<Napi::String>();
    c.start = num("start").Int32Value();
    c.end = num("end").Int32Value();
    c.dim = num("dim").Int32Value();
    c.hiddenDim = num("hiddenDim").Int32Value();
    c.nHeads = num("nHeads").Int32Value();
    c.nKvHeads = num("nKvHeads").Int32Value();
    c.headDim = num("headDim").Int32Value();
    c.seqLen = num("seqLen").Int32Value();
    c.rmsEps = num("rmsEps").FloatValue();
    c.ropeTheta = num("ropeTheta").FloatValue();
    c.ropeFreqScale = num("ropeFreqScale").FloatValue();
    c.ropeMode = o.Get("ropeType").As<Napi::String>().Utf8Value() == "neox" ? GGML_ROPE_TYPE_NEOX : GGML_ROPE_TYPE_NORMAL;
    c.qkvBias = o.Get("qkvBias").ToBoolean();
    c.qkNorm = o.Get("qkNorm").ToBoolean();
    c.kvType = o.Get("kvDType").As<Napi::String>().Utf8Value() == "f32" ? GGML_TYPE_F32 : GGML_TYPE_F16;
    c.device = num("device").Int32Value();
    c.threads = num("threads").Int32Value();
    if (o.Get("freqFactors").IsTypedArray()) {
      Napi::Float32Array f = o.Get("freqFactors").As<Napi::Float32Array>();
      c.freqFactors.assign(f.Data(), f.Data() + f.ElementLength());
    }
    span_ = std::make_unique<lsg::Span>(c);
    if (!span_->error().empty()) {
      std::string e = span_->error();
      span_.reset();
      Fail(env, e);
    }
  }

 private:
  lsg::Span* live(Napi::Env env) {
    if (!span_) Fail(env, "the ggml span is closed");
    return span_.get();
  }
  Napi::Value OpenSession(const Napi::CallbackInfo& info) {
    lsg::Span* s = live(info.Env());
    if (!s) return info.Env().Undefined();
    const std::string e = s->openSession(info[0].As<Napi::Number>().Int32Value(), info[1].As<Napi::Number>().Int32Value());
    return e.empty() ? info.Env().Undefined() : Fail(info.Env(), e);
  }
  Napi::Value CloseSession(const Napi::CallbackInfo& info) {
    lsg::Span* s = live(info.Env());
    if (!s) return info.Env().Undefined();
    return Napi::Boolean::New(info.Env(), s->closeSession(info[0].As<Napi::Number>().Int32Value()));
  }
  /** forward(x: Float32Array [Σ rows, dim], ids: Int32Array, rows: Int32Array, startPos: Int32Array): x is overwritten. */
  Napi::Value Forward(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    lsg::Span* s = live(env);
    if (!s) return env.Undefined();
    Napi::Float32Array x = info[0].As<Napi::Float32Array>();
    Napi::Int32Array ids = info[1].As<Napi::Int32Array>(), rows = info[2].As<Napi::Int32Array>(), at = info[3].As<Napi::Int32Array>();
    std::vector<lsg::StepPart> parts;
    size_t total = 0;
    for (size_t i = 0; i < ids.ElementLength(); i++) {
      lsg::Session* sess = s->session(ids[i]);
      if (!sess) return Fail(env, "no ggml session " + std::to_string(ids[i]));
      if (rows[i] < 1 || at[i] < 0 || at[i] + rows[i] > sess->maxLength) return Fail(env, "step does not fit the session's KV cache");
      parts.push_back({sess, rows[i], at[i]});
      total += size_t(rows[i]);
    }
    if (parts.empty() || x.ElementLength() != total * size_t(info[4].As<Napi::Number>().Int32Value()))
      return Fail(env, "hidden states do not match the step's rows");
    const std::string e = s->forward(parts, x.Data());
    return e.empty() ? env.Undefined() : Fail(env, e);
  }
  Napi::Value ExportKv(const Napi::CallbackInfo& info) { return Kv(info, true); }
  Napi::Value ImportKv(const Napi::CallbackInfo& info) { return Kv(info, false); }
  /** (id, from, n, bytes: Uint8Array) of exactly n positions' rows, every block. */
  Napi::Value Kv(const Napi::CallbackInfo& info, bool out) {
    Napi::Env env = info.Env();
    lsg::Span* s = live(env);
    if (!s) return env.Undefined();
    lsg::Session* sess = s->session(info[0].As<Napi::Number>().Int32Value());
    const int from = info[1].As<Napi::Number>().Int32Value(), n = info[2].As<Napi::Number>().Int32Value();
    Napi::Uint8Array bytes = info[3].As<Napi::Uint8Array>();
    if (!sess) return Fail(env, "no such ggml session");
    if (from < 0 || n < 0 || from + n > sess->maxLength || bytes.ByteLength() != s->kvRowBytes() * 2 * sess->k.size() * size_t(n))
      return Fail(env, "KV rows do not fit the session");
    if (out) s->readKv(*sess, from, n, bytes.Data());
    else s->writeKv(*sess, from, n, bytes.Data());
    return env.Undefined();
  }
  Napi::Value Close(const Napi::CallbackInfo& info) {
    span_.reset();
    return info.Env().Undefined();
  }
  Napi::Value Info(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    lsg::Span* s = live(env);
    if (!s) return env.Undefined();
    Napi::Object o = Napi::Object::New(env);
    o.Set("weightBytes", double(s->weightBytes()));
    o.Set("device", s->deviceName());
    o.Set("kvRowBytes", double(s->kvRowBytes()));
    return o;
  }
  std::unique_ptr<lsg::Span> span_;
};

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("load", Napi::Function::New(env, Load));
  exports.Set("devices", Napi::Function::New(env, Devices));
  exports.Set("Span", SpanWrap::Define(env));
  return exports;
}

}  // namespace

NODE_API_MODULE(layerswarm_ggml, Init)
