// The single import surface for generated protobuf code: nothing else imports proto/gen.
export {
  ExecutorServiceClient,
  ExecutorServiceService,
  GetCapabilitiesRequest,
  GetCapabilitiesResponse,
  type ExecutorServiceServer,
  Gate,
} from './gen/executor/v1/executor.js';
