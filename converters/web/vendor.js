// Build step (run by `npm install` as postinstall, or by hand: `npm run vendor`): copy the TF.js browser bundle
// from node_modules into vendor/ so that the demo page loads it from its own folder (no CDN at run time).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const packageDir = path.join(here, "node_modules", "@tensorflow", "tfjs");
const source = path.join(packageDir, "dist", "tf.min.js");
const target = path.join(here, "vendor", "tf.min.js");

if (!fs.existsSync(source)) {
  console.error(`vendor.js: ${source} not found; run \`npm install\` in ${here} first.`);
  process.exit(1);
}
fs.mkdirSync(path.dirname(target), { recursive: true });
fs.copyFileSync(source, target);
const { version } = JSON.parse(fs.readFileSync(path.join(packageDir, "package.json"), "utf8"));
fs.writeFileSync(path.join(here, "vendor", "VERSION"), `@tensorflow/tfjs ${version}\n`);
console.log(`vendor.js: copied @tensorflow/tfjs ${version} to ${path.relative(here, target)}`);
