// CartPole-v1 in JavaScript: the physics of gymnasium's CartPole-v1 (classic_control/cartpole.py, Euler
// integrator), its termination rules and its 500-step time limit, plus a canvas renderer in the style of
// gymnasium's pygame renderer. State is kept in double precision as in gymnasium; observations are float32.

export const CARTPOLE = Object.freeze({
  gravity: 9.8,
  masscart: 1.0,
  masspole: 0.1,
  totalMass: 1.1,            // masspole + masscart
  length: 0.5,               // actually half the pole's length
  polemassLength: 0.05,      // masspole * length
  forceMag: 10.0,
  tau: 0.02,                 // seconds between state updates
  thetaThresholdRadians: (12 * 2 * Math.PI) / 360,
  xThreshold: 2.4,
  maxEpisodeSteps: 500,      // CartPole-v1's TimeLimit
});

/** A small seeded PRNG (mulberry32) returning floats in [0, 1). */
export function mulberry32(seed) {
  let a = seed >>> 0;
  return function next() {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class CartPole {
  constructor(seed = 0) {
    this.random = mulberry32(seed);
    this.state = [0, 0, 0, 0];
    this.steps = 0;
    this.done = false;
    this.terminated = false;
    this.truncated = false;
  }

  /** Start an episode: each state variable uniform in [-0.05, 0.05] (or the given state). Returns the observation. */
  reset(state = null) {
    this.state = state ? state.map(Number) : [0, 1, 2, 3].map(() => -0.05 + 0.1 * this.random());
    this.steps = 0;
    this.done = false;
    this.terminated = false;
    this.truncated = false;
    return this.observation();
  }

  observation() {
    return Float32Array.from(this.state);
  }

  /** One step with action 0 (push left) or 1 (push right): {observation, reward, terminated, truncated}. */
  step(action) {
    if (action !== 0 && action !== 1) throw new Error("CartPole: action must be 0 or 1, got " + action);
    if (this.done) throw new Error("CartPole: step() called after the episode ended; call reset()");
    const c = CARTPOLE;
    let [x, xDot, theta, thetaDot] = this.state;
    const force = action === 1 ? c.forceMag : -c.forceMag;
    const costheta = Math.cos(theta);
    const sintheta = Math.sin(theta);
    const temp = (force + c.polemassLength * thetaDot * thetaDot * sintheta) / c.totalMass;
    const thetaacc = (c.gravity * sintheta - costheta * temp) /
      (c.length * (4.0 / 3.0 - (c.masspole * costheta * costheta) / c.totalMass));
    const xacc = temp - (c.polemassLength * thetaacc * costheta) / c.totalMass;
    // Euler integration (gymnasium's default kinematics_integrator)
    x = x + c.tau * xDot;
    xDot = xDot + c.tau * xacc;
    theta = theta + c.tau * thetaDot;
    thetaDot = thetaDot + c.tau * thetaacc;
    this.state = [x, xDot, theta, thetaDot];
    this.steps += 1;
    this.terminated = x < -c.xThreshold || x > c.xThreshold ||
      theta < -c.thetaThresholdRadians || theta > c.thetaThresholdRadians;
    this.truncated = !this.terminated && this.steps >= c.maxEpisodeSteps;
    this.done = this.terminated || this.truncated;
    return { observation: this.observation(), reward: 1.0, terminated: this.terminated, truncated: this.truncated };
  }
}

/** Draw the cart and pole (gymnasium's 600x400 layout, scaled to the canvas). */
export function drawCartPole(ctx, state, options = {}) {
  const width = ctx.canvas.width;
  const height = ctx.canvas.height;
  const c = CARTPOLE;
  const worldWidth = c.xThreshold * 2;
  const scale = width / worldWidth;
  const poleWidth = 10 * (width / 600);
  const poleLen = scale * (2 * c.length);
  const cartWidth = 50 * (width / 600);
  const cartHeight = 30 * (width / 600);
  const [x, , theta] = state;
  const trackY = height * 0.75;   // gymnasium: carty = 100 px from the bottom of a 400 px screen
  const cartX = x * scale + width / 2;

  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, width, height);
  // track
  ctx.strokeStyle = "#000000";
  ctx.lineWidth = 1;
  ctx.beginPath();
  ctx.moveTo(0, trackY);
  ctx.lineTo(width, trackY);
  ctx.stroke();
  // cart
  ctx.fillStyle = options.failed ? "#b03030" : "#000000";
  ctx.fillRect(cartX - cartWidth / 2, trackY - cartHeight / 2, cartWidth, cartHeight);
  // pole, rotated about the axle (theta > 0: leaning right)
  const axleY = trackY - cartHeight / 4;
  ctx.save();
  ctx.translate(cartX, axleY);
  ctx.rotate(theta);
  ctx.fillStyle = "#ca9865";
  ctx.fillRect(-poleWidth / 2, -(poleLen - poleWidth / 2), poleWidth, poleLen);
  ctx.restore();
  // axle
  ctx.fillStyle = "#8184cb";
  ctx.beginPath();
  ctx.arc(cartX, axleY, poleWidth / 2, 0, 2 * Math.PI);
  ctx.fill();
}
