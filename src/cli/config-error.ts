/** A configuration value that is wrong; the message names its source (`--port`, `KVROUTE_PORT`, a file's key). */
export class ConfigError extends Error {}
