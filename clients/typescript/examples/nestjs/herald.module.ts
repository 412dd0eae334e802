// A NestJS module that provides one HeraldClient to the whole application, built from config.
// Not compiled with the package (see tsconfig.json's exclude); needs @nestjs/common,
// @nestjs/config and, for IAM, @aws-sdk/credential-providers in the application.
//
// Environment:
//   HERALD_URL          Herald's base URL: http://127.0.0.1:8080 (herald dev) or the API Gateway stage URL
//   HERALD_API_KEY      a service API key (local, self-hosted); without it requests are SigV4-signed
//   AWS_REGION          the region of API Gateway and of the ingest queue (IAM)
//   HERALD_SERVICE      this service's name in herald.yaml (for the ingest queue)
//   HERALD_INGEST_QUEUE the URL of herald-<env>-ingest-<service>: when set, sends go straight to SQS

import { Global, Injectable, Module, type OnApplicationShutdown } from "@nestjs/common";
import { ConfigModule, ConfigService } from "@nestjs/config";
import { fromNodeProviderChain } from "@aws-sdk/credential-providers";
import { HeraldClient, HttpTransport, SqsTransport, type HttpAuth } from "@herald/client";

export function createHeraldClient(config: ConfigService): HeraldClient {
  const apiKey = config.get<string>("HERALD_API_KEY");
  const region = config.get<string>("AWS_REGION") ?? "us-east-1";
  const credentials = fromNodeProviderChain();
  const auth: HttpAuth = apiKey ? { apiKey } : { sigv4: { region, credentials } };
  const http = new HttpTransport({
    baseUrl: config.getOrThrow<string>("HERALD_URL"),
    auth,
    retry: { maxAttempts: 5, baseMs: 100, maxMs: 5000 },
    timeoutMs: 10_000,
  });
  const queueUrl = config.get<string>("HERALD_INGEST_QUEUE");
  if (!queueUrl) return new HeraldClient(http);
  const sqs = new SqsTransport({
    queueUrl,
    service: config.getOrThrow<string>("HERALD_SERVICE"),
    region,
    credentials,
    whenFull: "block",
  });
  // Sends go to the queue; reading a notification, devices, preferences… go over HTTP.
  return new HeraldClient(sqs, { http });
}

/** Sends what the SQS transport still buffers when the application stops (app.enableShutdownHooks()). */
@Injectable()
export class HeraldShutdown implements OnApplicationShutdown {
  constructor(private readonly herald: HeraldClient) {}

  async onApplicationShutdown(): Promise<void> {
    await this.herald.close();
  }
}

@Global()
@Module({
  imports: [ConfigModule],
  providers: [
    { provide: HeraldClient, inject: [ConfigService], useFactory: createHeraldClient },
    HeraldShutdown,
  ],
  exports: [HeraldClient],
})
export class HeraldModule {}
