export { HeraldClient, type HeraldClientOptions, type PageOptions } from "./client.js";
export { HeraldBatchError, HeraldError, type BatchResult } from "./errors.js";
export { HttpTransport, routePath, type AwsCredentials, type HttpAuth, type HttpTransportOptions, type RequestOptions } from "./http.js";
export { deriveKey, deriveNotificationId, MAX_KEY_LENGTH } from "./idempotency.js";
export type { RetryOptions } from "./retry.js";
export type { CallOptions, Sender } from "./sender.js";
export { LANE_ATTRIBUTE, SqsTransport, type SqsTransportOptions } from "./sqs.js";
export type * from "./types.gen.js";
export type { Error as ErrorBody } from "./types.gen.js";
