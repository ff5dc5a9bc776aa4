// Preloaded into Node test servers (`node --require loopback.cjs ...`): a `listen(port)` without
// a host binds 127.0.0.1 instead of every interface.
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || (typeof args[0] === "string" && /^\d+$/.test(args[0]))) {
    const callback = args.find((arg) => typeof arg === "function");
    return listen.call(this, { port: Number(args[0]), host: "127.0.0.1" }, callback);
  }
  return listen.apply(this, args);
};
