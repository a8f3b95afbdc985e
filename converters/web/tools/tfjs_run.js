// Run TF.js graph models exported by sbtf in Node with @tensorflow/tfjs (pure JS, CPU backend) through policy.js.
// Used by tests/test_export.py to check that the TF.js export gives the same outputs as Python.
//
//   node tools/tfjs_run.js REQUEST.json
//
// REQUEST.json: {"runs": [{"model_dir": "/path/to/tfjs_export", "inputs": {"observation": [[...], ...], ...}}, ...]}
// Prints {"results": [{"name": {"data": [...], "shape": [...], "dtype": "..."}, ...}, ...]} on stdout.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { SbtfPolicy } from "../policy.js";

const require = createRequire(import.meta.url);

async function loadPolicy(tf, dir) {
  const modelJson = JSON.parse(fs.readFileSync(path.join(dir, "model.json"), "utf8"));
  const meta = JSON.parse(fs.readFileSync(path.join(dir, "sbtf_export.json"), "utf8"));
  const artifacts = await tf.io.getModelArtifactsForJSON(modelJson, async (manifest) => {
    const specs = [];
    const buffers = [];
    for (const group of manifest) {
      specs.push(...group.weights);
      for (const file of group.paths) buffers.push(fs.readFileSync(path.join(dir, file)));
    }
    const all = Buffer.concat(buffers);
    return [specs, all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength)];
  });
  const model = await tf.loadGraphModel(tf.io.fromMemory(artifacts));
  return new SbtfPolicy(tf, model, meta);
}

async function main() {
  if (process.argv.length < 3) {
    console.error("usage: node tools/tfjs_run.js REQUEST.json");
    process.exit(2);
  }
  const tf = require("@tensorflow/tfjs");
  await tf.setBackend("cpu");
  const request = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  const results = [];
  for (const run of request.runs) {
    const policy = await loadPolicy(tf, run.model_dir);
    results.push(await policy.run(run.inputs));
    policy.model.dispose();
  }
  process.stdout.write(JSON.stringify({ tfjs_version: tf.version.tfjs, backend: tf.getBackend(), results }));
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
