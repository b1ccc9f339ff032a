/** An error of the simulated engine's API, with its HTTP status and vLLM's error `type`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}
