// sbtf policy in the browser (or Node): loads a TF.js graph model written by `sbtf export --format tfjs` and runs it.
//
//   import { SbtfPolicy } from "./policy.js";
//   const policy = await SbtfPolicy.load("model/");         // uses the global `tf` (vendor/tf.min.js)
//   const action = await policy.act([0.01, 0.0, -0.02, 0.0]); // one observation -> one action
//   const out = await policy.run({ observation: [[...], [...]] }); // a batch -> { action, value, ... }
//
// The model folder holds model.json + weight shards (TF.js graph model) and sbtf_export.json (input / output
// names, dtypes and shapes, the spaces, and whether VecNormalize statistics were folded in). The graph model's
// outputs are the SavedModel's: `action` (what model.predict(obs, deterministic=True) returns in Python; int64
// actions are int32 here) and, where the policy has them, `logits`, `probabilities`, `mean`, `std`, `value`,
// `q_values`, and `state` for recurrent policies (which take `state` and `mask` inputs). HER models take the goal
// env's dict observation as three inputs: `observation`, `achieved_goal`, `desired_goal`.

const TFJS_DTYPES = { float32: "float32", float64: "float32", int32: "int32", int64: "int32", uint8: "int32",
                      int8: "int32", int16: "int32", uint16: "int32", bool: "bool" };

function flatten(value, out) {
  if (ArrayBuffer.isView(value)) {
    for (let i = 0; i < value.length; i++) out.push(Number(value[i]));
  } else if (Array.isArray(value)) {
    for (const item of value) flatten(item, out);
  } else {
    out.push(Number(value));
  }
  return out;
}

export class SbtfPolicy {
  /**
   * @param tf the @tensorflow/tfjs namespace
   * @param model a tf.GraphModel converted by sbtf
   * @param meta the parsed sbtf_export.json
   */
  constructor(tf, model, meta) {
    this.tf = tf;
    this.model = model;
    this.meta = meta;
    this.inputNames = Object.keys(meta.inputs);
    this.outputNames = Object.keys(meta.outputs);
    this.obsShape = meta.inputs.observation.shape.slice(1);
    this.obsSize = this.obsShape.reduce((a, b) => a * b, 1);
    this.state = null;
    this.backend = tf.getBackend();
    this.fallbackReason = null;
    // graph node names of the inputs and outputs (sbtf_export.json "tfjs_nodes"; written by the exporter because
    // the converter's signature keys are ambiguous when two outputs have the same shape and dtype)
    const nodes = meta.tfjs_nodes || { inputs: {}, outputs: {} };
    this.inputNodes = {};
    for (const name of this.inputNames) this.inputNodes[name] = nodes.inputs[name] || name;
    this.outputNodes = this.outputNames.map((name) => nodes.outputs[name] || name);
  }

  /**
   * Load from a folder URL holding model.json and sbtf_export.json (in a page, relative URLs work).
   * options.backend: a TF.js backend to use ("cpu", "webgl", ...); by default TF.js picks one (WebGL in most
   * browsers). A first run on zeros checks that the backend has every kernel the model needs: TF.js 4.22's WebGL
   * backend, for one, has no fused MatMul+tanh (what the converter makes of tanh MLP layers), so the policy then
   * moves to the CPU backend (fast for small policies) and says why in `fallbackReason`.
   */
  static async load(baseUrl, tf = globalThis.tf, options = {}) {
    if (!tf) throw new Error("SbtfPolicy.load: TensorFlow.js is not loaded (include vendor/tf.min.js first)");
    if (options.backend) await tf.setBackend(options.backend);
    await tf.ready();
    const base = baseUrl.endsWith("/") ? baseUrl : baseUrl + "/";
    const response = await fetch(base + "sbtf_export.json");
    if (!response.ok) throw new Error("cannot fetch " + base + "sbtf_export.json: HTTP " + response.status);
    const meta = await response.json();
    const model = await tf.loadGraphModel(base + "model.json");
    const policy = new SbtfPolicy(tf, model, meta);
    await policy.warmUp();
    return policy;
  }

  /** Run once on zero inputs; fall back to the CPU backend if the current one cannot run the model. */
  async warmUp() {
    const zeros = {};
    for (const name of this.inputNames) {
      zeros[name] = new Float32Array(this.meta.inputs[name].shape.slice(1).reduce((a, b) => a * b, 1));
    }
    try {
      await this.run(zeros, ["action"]);
    } catch (err) {
      const failed = this.tf.getBackend();
      if (failed === "cpu") throw err;
      this.fallbackReason = "the " + failed + " backend cannot run this model (" + (err && err.message) +
        "); using the cpu backend";
      await this.tf.setBackend("cpu");
      await this.tf.ready();
      await this.run(zeros, ["action"]);
    }
    this.backend = this.tf.getBackend();
    return this.backend;
  }

  get recurrent() {
    return Boolean(this.meta.recurrent);
  }

  get stateSize() {
    return this.meta.state_size || 0;
  }

  tensorFor(name, value, batch) {
    const info = this.meta.inputs[name];
    const dtype = TFJS_DTYPES[info.dtype] || "float32";
    const shape = [batch].concat(info.shape.slice(1));
    return this.tf.tensor(flatten(value, []), shape, dtype);
  }

  /**
   * Run the exported function on a batch.
   * @param inputs { observation: nested array / TypedArray of shape [batch, ...obs], state?, mask? }
   * @param outputs the names of the outputs to compute (default: all of them)
   * @returns { name: { data: number[], shape: number[], dtype: string } } for each requested output
   */
  async run(inputs, outputs = this.outputNames) {
    for (const name of outputs) {
      if (!this.outputNames.includes(name)) {
        throw new Error("SbtfPolicy.run: unknown output `" + name + "`; the model has " + this.outputNames.join(", "));
      }
    }
    if (!("observation" in inputs)) throw new Error("SbtfPolicy.run: an `observation` input is required");
    const nObs = flatten(inputs.observation, []).length;
    if (this.obsSize === 0 || nObs % this.obsSize !== 0) {
      throw new Error("SbtfPolicy.run: observations of shape [batch, " + this.obsShape.join(", ") +
                      "] expected, got " + nObs + " numbers");
    }
    const batch = nObs / this.obsSize;
    const feed = {};
    const created = [];
    for (const name of this.inputNames) {
      let value = inputs[name];
      if (value === undefined) {
        if (name === "state") value = new Float32Array(batch * this.stateSize);
        else if (name === "mask") value = new Float32Array(batch);
        else throw new Error("SbtfPolicy.run: missing input `" + name + "`");
      }
      const tensor = this.tensorFor(name, value, batch);
      created.push(tensor);
      feed[this.inputNodes[name]] = tensor;
    }
    try {
      const nodes = outputs.map((name) => this.outputNodes[this.outputNames.indexOf(name)]);
      let result = this.model.execute(feed, nodes);
      if (!Array.isArray(result)) result = [result];
      const out = {};
      for (let i = 0; i < outputs.length; i++) {
        const tensor = result[i];
        out[outputs[i]] = { data: Array.from(await tensor.data()), shape: tensor.shape, dtype: tensor.dtype };
        tensor.dispose();
      }
      return out;
    } finally {
      created.forEach((t) => t.dispose());
    }
  }

  /** Forget the recurrent state (call at the start of every episode). */
  reset() {
    this.state = null;
  }

  /**
   * One observation -> one action (a number, or an array for vector actions). Recurrent policies keep their
   * state between calls (zeros after reset(), as sbtf's predict with state=None). For HER models pass the dict
   * observation: { observation, achieved_goal, desired_goal }.
   */
  async act(observation) {
    const isDict = observation !== null && typeof observation === "object" && !Array.isArray(observation) &&
      !ArrayBuffer.isView(observation);
    const inputs = {};
    if (isDict) {
      for (const [name, value] of Object.entries(observation)) inputs[name] = [value];
    } else {
      inputs.observation = [observation];
    }
    if (this.recurrent) {
      inputs.state = this.state || new Float32Array(this.stateSize);
      inputs.mask = [0];
    }
    const out = await this.run(inputs, this.recurrent ? ["action", "state"] : ["action"]);
    if (this.recurrent) this.state = Float32Array.from(out.state.data);
    const action = out.action;
    return action.shape.length === 1 ? action.data[0] : action.data;
  }
}
