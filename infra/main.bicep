// turn-export-worker on Azure: Service Bus (turn.completed queue with sessions, export.published
// topic), Blob Storage (artifacts in, exports out), Cosmos DB (conversations, messages, turn
// records) and a Container Apps worker that scales on the queue's backlog with a KEDA
// `azure-servicebus` rule. Every data-plane call uses Entra ID (managed identities); keys and
// connection strings are disabled on all three services.
//
//   az deployment group create -g <rg> -f infra/main.bicep -p image=<registry>/turn-export-worker:<tag>
//
// Not deployed from this repository's CI (no cloud there): see infra/README.md for what was and
// was not verified.

targetScope = 'resourceGroup'

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------
@description('Region of every resource.')
param location string = resourceGroup().location

@description('Short name prefix: 3 to 11 lowercase letters and digits, starting with a letter (the storage account adds a 13-character suffix and allows 24).')
@minLength(3)
@maxLength(11)
param prefix string = 'turnexport'

@description('Worker image built from infra/Dockerfile, e.g. myregistry.azurecr.io/turn-export-worker:0.1.0.')
param image string

@description('Azure Container Registry (in this resource group) holding the image; empty when the image is public.')
param registryName string = ''

@description('Service Bus tier. Premium for private networking and steady latency; Standard is enough for sessions.')
@allowed([
  'Standard'
  'Premium'
])
param serviceBusSku string = 'Standard'

@description('Queue of turn.completed events (EXPORT_WORKER_QUEUE_NAME).')
param queueName string = 'turn-completed'

@description('Topic of export.published events (EXPORT_WORKER_TOPIC_NAME).')
param topicName string = 'export-published'

@description('Subscription created on the topic for the chat service; empty for none.')
param publishedSubscriptionName string = 'chat-service'

@description('Maximum size of the topic in MB, its subscriptions and their dead letters together (Standard: 1024 to 5120; Premium: up to 81920). Full, it refuses every publish.')
@minValue(1024)
@maxValue(81920)
param topicMaxSizeMegabytes int = 1024

// The worker's settings below default to worker/settings.py's defaults (a test parses this
// file and fails when they disagree); change them here only to tune a deployment.
@description('Worker attempts before it dead-letters with its own reason (EXPORT_WORKER_MAX_ATTEMPTS).')
@minValue(1)
param maxAttempts int = 5

@description('Service Bus delivery limit: above maxAttempts, so the broker only dead-letters what the worker could not (crashes, lost locks). Raised to maxAttempts + 1 when set lower.')
@minValue(2)
param maxDeliveryCount int = 10

@description('Seconds in-flight work gets after SIGTERM before it is abandoned (EXPORT_WORKER_SHUTDOWN_GRACE_SECONDS). At most 480: the replica gets 120 s more, and Container Apps allows a termination grace period of 600 s at most.')
@minValue(0)
@maxValue(480)
param shutdownGraceSeconds int = 30

@description('Session workers per replica (EXPORT_WORKER_CONCURRENCY; the Functions trigger\'s maxConcurrentSessions): turns of different conversations handled at once.')
@minValue(1)
param concurrencyPerReplica int = 4

@description('Seconds a session worker waits for the first message of a session it accepted (EXPORT_WORKER_SESSION_IDLE_SECONDS; the Functions trigger\'s sessionIdleTimeout); after each message the session is released at once unless its next one is already queued. A decimal number as text: Bicep has no floats.')
param sessionIdleSeconds string = '0.2'

@description('Seconds a received message and its session stay locked without renewal: the queue\'s lockDuration and EXPORT_WORKER_LOCK_DURATION_SECONDS (the worker renews every third of it).')
@minValue(5)
@maxValue(300)
param lockDurationSeconds int = 60

@description('Seconds one message\'s lock is renewed at most, from its delivery (EXPORT_WORKER_MAX_LOCK_RENEWAL_SECONDS; the Functions trigger\'s maxAutoLockRenewalDuration): longer than the longest export. The session lock is renewed for as long as the session is held.')
@minValue(60)
param maxLockRenewalSeconds int = 3600

@description('Port of /healthz, /readyz and /metrics in the container (EXPORT_WORKER_HTTP_PORT; the image sets the same).')
@minValue(1)
@maxValue(65535)
param httpPort int = 8080

@description('Worker log level (EXPORT_WORKER_LOG_LEVEL); `run` logs at info when unset.')
@allowed([
  'debug'
  'info'
  'warning'
  'error'
  'critical'
])
param logLevel string = 'info'

@description('Replicas when the queue is empty (0 scales to zero; 1 avoids a cold start on the first turn).')
@minValue(0)
param minReplicas int = 0

@description('Upper bound of replicas. Useful concurrency is bounded by active conversations, not by messages.')
@minValue(1)
@maxValue(300)
param maxReplicas int = 10

@description('Queued (active) messages per replica the scale rule aims for.')
@minValue(1)
param messagesPerReplica int = 4

@description('vCPU per replica.')
param cpu string = '1.0'

@description('Memory per replica (Consumption profile: 2 GiB per vCPU).')
param memory string = '2Gi'

@description('Maximum autoscale throughput (RU/s) shared by the chat database containers.')
@minValue(1000)
param cosmosMaxThroughput int = 1000

@description('Days after which exports are deleted by a lifecycle rule; 0 keeps them.')
@minValue(0)
param exportRetentionDays int = 30

@description('Object id of an Entra group of operators (DLQ list/replay, reading exports and turn records); empty for none.')
param operatorsPrincipalId string = ''

@description('Days of log retention in the Log Analytics workspace.')
@minValue(30)
param logRetentionDays int = 30

@description('Resource id of an existing action group the alerts notify; empty to create one for alertEmail.')
param actionGroupId string = ''

@description('E-mail address of the action group created when actionGroupId is empty; with both empty, alerts fire without notifying anyone.')
param alertEmail string = ''

// ---------------------------------------------------------------------------------------------
// Names and built-in role ids
// ---------------------------------------------------------------------------------------------
var suffix = uniqueString(resourceGroup().id, prefix)
// Bicep has no pattern decorator: the prefix's alphabet is checked here, and fail() stops
// the deployment before a name Azure would reject half-way through (storage accounts take
// lowercase letters and digits only).
var letters = 'abcdefghijklmnopqrstuvwxyz'
var prefixChars = map(range(0, length(prefix)), i => substring(prefix, i, 1))
var prefixIsValid = contains(letters, first(prefix)) && empty(filter(prefixChars, c => !contains('${letters}0123456789', c)))
var base = prefixIsValid ? prefix : fail('prefix: lowercase letters and digits only, starting with a letter')
var databaseName = 'chat'
var artifactsContainerName = 'artifacts'
var exportsContainerName = 'exports'
var cosmosContainers = [
  { name: 'conversations', partitionKey: '/id' }
  { name: 'messages', partitionKey: '/conversation_id' }
  { name: 'turns', partitionKey: '/conversation_id' }
]

var roles = {
  serviceBusDataReceiver: '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'
  serviceBusDataSender: '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'
  serviceBusDataOwner: '090c5cfd-751d-490a-894a-3ce6f1109419'
  storageBlobDataReader: '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1'
  storageBlobDataContributor: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
  acrPull: '7f951dda-4ed3-4680-a7ca-43fe172d538d'
}
// Cosmos DB data-plane roles are not Azure RBAC roles: they live under the account.
var cosmosDataReader = '00000000-0000-0000-0000-000000000001'
var cosmosDataContributor = '00000000-0000-0000-0000-000000000002'

// ---------------------------------------------------------------------------------------------
// Identities: the worker's (data plane), and the scaler's (reads queue counts, which needs Manage)
// ---------------------------------------------------------------------------------------------
resource workerIdentity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: '${base}-worker-id'
  location: location
}

resource scalerIdentity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: '${base}-scaler-id'
  location: location
}

// ---------------------------------------------------------------------------------------------
// Service Bus
// ---------------------------------------------------------------------------------------------
resource serviceBus 'Microsoft.ServiceBus/namespaces@2022-10-01-preview' = {
  name: '${base}-sb-${suffix}'
  location: location
  sku: {
    name: serviceBusSku
    tier: serviceBusSku
  }
  properties: {
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
  }
}

// Sessions = conversations: one holder per conversation, FIFO inside it.
resource turnQueue 'Microsoft.ServiceBus/namespaces/queues@2022-10-01-preview' = {
  parent: serviceBus
  name: queueName
  properties: {
    requiresSession: true
    // The worker renews every third of it: one parameter for both (workerSettings below).
    lockDuration: 'PT${lockDurationSeconds}S'
    // Never at or below maxAttempts: the broker would dead-letter first, and the turn's own
    // reason (conversation_not_found, ...) would be lost to MaxDeliveryCountExceeded.
    maxDeliveryCount: max(maxDeliveryCount, maxAttempts + 1)
    deadLetteringOnMessageExpiration: true
    defaultMessageTimeToLive: 'P14D'
    // Off on purpose: `dlq replay` re-sends with the same message id.
    requiresDuplicateDetection: false
    enablePartitioning: false
  }
}

// Message id = export id: a re-publish after a crash between send and record is dropped.
resource publishedTopic 'Microsoft.ServiceBus/namespaces/topics@2022-10-01-preview' = {
  parent: serviceBus
  name: topicName
  properties: {
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: 'P1D'
    defaultMessageTimeToLive: 'P14D'
    maxSizeInMegabytes: topicMaxSizeMegabytes
    enablePartitioning: false
  }
}

resource publishedSubscription 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2022-10-01-preview' = if (!empty(publishedSubscriptionName)) {
  parent: publishedTopic
  name: empty(publishedSubscriptionName) ? 'unused' : publishedSubscriptionName
  properties: {
    lockDuration: 'PT1M'
    maxDeliveryCount: 10
    deadLetteringOnMessageExpiration: true
  }
}

// ---------------------------------------------------------------------------------------------
// Blob Storage
// ---------------------------------------------------------------------------------------------
resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  // checkov:skip=CKV_AZURE_43: the name is computed, which the check cannot evaluate: the validated prefix (3-11 lowercase letters and digits) plus uniqueString (13 lowercase letters and digits), cut to 24
  // checkov:skip=CKV_AZURE_35: networking is out of scope (infra/README.md): the worker on the Consumption profile has no fixed address or VNet; every call is Entra ID only, shared keys are off
  // checkov:skip=CKV_AZURE_206: exports are derived (a replay rewrites them) and expire; artifacts stand in for the chat service's own storage, whose redundancy is that service's choice
  name: take('${base}${suffix}', 24)
  location: location
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    accessTier: 'Hot'
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource artifactsContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobService
  name: artifactsContainerName
  properties: {
    publicAccess: 'None'
  }
}

resource exportsContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobService
  name: exportsContainerName
  properties: {
    publicAccess: 'None'
  }
}

resource exportsLifecycle 'Microsoft.Storage/storageAccounts/managementPolicies@2023-05-01' = if (exportRetentionDays > 0) {
  parent: storage
  name: 'default'
  properties: {
    policy: {
      rules: [
        {
          name: 'expire-exports'
          enabled: true
          type: 'Lifecycle'
          definition: {
            filters: {
              blobTypes: [
                'blockBlob'
              ]
              prefixMatch: [
                '${exportsContainerName}/'
              ]
            }
            actions: {
              baseBlob: {
                delete: {
                  daysAfterModificationGreaterThan: exportRetentionDays
                }
              }
            }
          }
        }
      ]
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Cosmos DB
// ---------------------------------------------------------------------------------------------
resource cosmos 'Microsoft.DocumentDB/databaseAccounts@2024-05-15' = {
  // checkov:skip=CKV_AZURE_101: networking is out of scope (infra/README.md): the worker on the Consumption profile has no VNet; every call is Entra ID only, key auth is off
  // checkov:skip=CKV_AZURE_99: same reason: no IP or VNet rule can admit the worker without VNet integration
  name: '${base}-cosmos-${suffix}'
  location: location
  kind: 'GlobalDocumentDB'
  properties: {
    databaseAccountOfferType: 'Standard'
    disableLocalAuth: true
    // Databases and containers change through ARM (this template) only, never with keys.
    disableKeyBasedMetadataWriteAccess: true
    consistencyPolicy: {
      defaultConsistencyLevel: 'Session'
    }
    locations: [
      {
        locationName: location
        failoverPriority: 0
        isZoneRedundant: false
      }
    ]
  }
}

resource database 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases@2024-05-15' = {
  parent: cosmos
  name: databaseName
  properties: {
    resource: {
      id: databaseName
    }
    options: {
      autoscaleSettings: {
        maxThroughput: cosmosMaxThroughput
      }
    }
  }
}

resource containers 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-05-15' = [
  for c in cosmosContainers: {
    parent: database
    name: c.name
    properties: {
      resource: {
        id: c.name
        partitionKey: {
          paths: [
            c.partitionKey
          ]
          kind: 'Hash'
        }
      }
    }
  }
]

// ---------------------------------------------------------------------------------------------
// Least-privilege role assignments for the worker
// ---------------------------------------------------------------------------------------------
// Receive, settle, renew session locks, peek the dead-letter sub-queue.
resource workerReceivesQueue 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: turnQueue
  name: guid(turnQueue.id, workerIdentity.id, roles.serviceBusDataReceiver)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataReceiver)
    principalId: workerIdentity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

resource workerSendsTopic 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: publishedTopic
  name: guid(publishedTopic.id, workerIdentity.id, roles.serviceBusDataSender)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataSender)
    principalId: workerIdentity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

resource workerReadsArtifacts 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: artifactsContainer
  name: guid(artifactsContainer.id, workerIdentity.id, roles.storageBlobDataReader)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageBlobDataReader)
    principalId: workerIdentity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

resource workerWritesExports 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: exportsContainer
  name: guid(exportsContainer.id, workerIdentity.id, roles.storageBlobDataContributor)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageBlobDataContributor)
    principalId: workerIdentity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

// The SDK reads account, database and container metadata before any item: one custom role with
// only that action, at account scope; the data roles below stay on the database / container.
resource metadataReader 'Microsoft.DocumentDB/databaseAccounts/sqlRoleDefinitions@2024-05-15' = {
  parent: cosmos
  name: guid(cosmos.id, 'export-worker-metadata-reader')
  properties: {
    roleName: 'Export worker metadata reader'
    type: 'CustomRole'
    assignableScopes: [
      cosmos.id
    ]
    permissions: [
      {
        dataActions: [
          'Microsoft.DocumentDB/databaseAccounts/readMetadata'
        ]
      }
    ]
  }
}

resource workerReadsMetadata 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-05-15' = {
  parent: cosmos
  name: guid(cosmos.id, workerIdentity.id, 'export-worker-metadata-reader')
  properties: {
    roleDefinitionId: metadataReader.id
    principalId: workerIdentity.properties.principalId
    scope: cosmos.id
  }
}

// Reads conversations and messages (the whole database) ...
resource workerReadsChat 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-05-15' = {
  parent: cosmos
  name: guid(cosmos.id, workerIdentity.id, cosmosDataReader)
  properties: {
    roleDefinitionId: '${cosmos.id}/sqlRoleDefinitions/${cosmosDataReader}'
    principalId: workerIdentity.properties.principalId
    scope: '${cosmos.id}/dbs/${databaseName}'
  }
  dependsOn: [
    database
  ]
}

// ... and writes only its ledger.
resource workerWritesTurns 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-05-15' = {
  parent: cosmos
  name: guid(cosmos.id, workerIdentity.id, cosmosDataContributor)
  properties: {
    roleDefinitionId: '${cosmos.id}/sqlRoleDefinitions/${cosmosDataContributor}'
    principalId: workerIdentity.properties.principalId
    scope: '${cosmos.id}/dbs/${databaseName}/colls/turns'
  }
  dependsOn: [
    containers
  ]
}

// KEDA reads the queue's runtime counts through the management API, which needs Manage:
// Data Owner, scoped to this one queue, on an identity the container cannot use (see the app).
resource scalerOwnsQueue 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: turnQueue
  name: guid(turnQueue.id, scalerIdentity.id, roles.serviceBusDataOwner)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataOwner)
    principalId: scalerIdentity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

resource registry 'Microsoft.ContainerRegistry/registries@2023-07-01' existing = if (!empty(registryName)) {
  name: empty(registryName) ? 'unused' : registryName
}

resource workerPullsImage 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(registryName)) {
  scope: registry
  name: guid(resourceGroup().id, registryName, workerIdentity.id, roles.acrPull)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.acrPull)
    principalId: workerIdentity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

// ---------------------------------------------------------------------------------------------
// Operators (optional): replay dead letters, read exports and turn records
// ---------------------------------------------------------------------------------------------
resource operatorsReceiveQueue 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(operatorsPrincipalId)) {
  scope: turnQueue
  name: guid(turnQueue.id, operatorsPrincipalId, roles.serviceBusDataReceiver)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataReceiver)
    principalId: operatorsPrincipalId
    principalType: 'Group'
  }
}

resource operatorsSendQueue 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(operatorsPrincipalId)) {
  scope: turnQueue
  name: guid(turnQueue.id, operatorsPrincipalId, roles.serviceBusDataSender)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataSender)
    principalId: operatorsPrincipalId
    principalType: 'Group'
  }
}

resource operatorsReadExports 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(operatorsPrincipalId)) {
  scope: exportsContainer
  name: guid(exportsContainer.id, operatorsPrincipalId, roles.storageBlobDataReader)
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageBlobDataReader)
    principalId: operatorsPrincipalId
    principalType: 'Group'
  }
}

resource operatorsReadMetadata 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-05-15' = if (!empty(operatorsPrincipalId)) {
  parent: cosmos
  name: guid(cosmos.id, operatorsPrincipalId, 'export-worker-metadata-reader')
  properties: {
    roleDefinitionId: metadataReader.id
    principalId: operatorsPrincipalId
    scope: cosmos.id
  }
}

resource operatorsReadTurns 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-05-15' = if (!empty(operatorsPrincipalId)) {
  parent: cosmos
  name: guid(cosmos.id, operatorsPrincipalId, cosmosDataReader)
  properties: {
    roleDefinitionId: '${cosmos.id}/sqlRoleDefinitions/${cosmosDataReader}'
    principalId: operatorsPrincipalId
    scope: '${cosmos.id}/dbs/${databaseName}/colls/turns'
  }
  dependsOn: [
    containers
  ]
}

// ---------------------------------------------------------------------------------------------
// Container Apps
// ---------------------------------------------------------------------------------------------
resource logs 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: '${base}-logs-${suffix}'
  location: location
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: logRetentionDays
  }
}

// Not named `environment`: that would shadow the environment() function used below.
resource appEnvironment 'Microsoft.App/managedEnvironments@2025-01-01' = {
  name: '${base}-env'
  location: location
  properties: {
    appLogsConfiguration: {
      destination: 'log-analytics'
      logAnalyticsConfiguration: {
        customerId: logs.properties.customerId
        sharedKey: logs.listKeys().primarySharedKey
      }
    }
    workloadProfiles: [
      {
        name: 'Consumption'
        workloadProfileType: 'Consumption'
      }
    ]
  }
}

// The image is pulled with the worker identity (AcrPull above) when a registry is named.
var registries = empty(registryName) ? [] : [
  {
    server: '${toLower(registryName)}${environment().suffixes.acrLoginServer}'
    identity: workerIdentity.id
  }
]

// Every EXPORT_WORKER_* setting the app gets, in one place, from parameters and names known
// before the deployment starts (a for-expression needs that). Each equals its default in
// worker/settings.py except BACKEND, HTTP_PORT (as the image) and LOG_LEVEL (as `run`);
// tests/infra/test_bicep_settings.py fails when they drift apart.
var workerSettings = {
  BACKEND: 'azure'
  QUEUE_NAME: queueName
  TOPIC_NAME: topicName
  ARTIFACTS_CONTAINER: artifactsContainerName
  EXPORTS_CONTAINER: exportsContainerName
  COSMOS_DATABASE: databaseName
  CONVERSATIONS_CONTAINER: 'conversations'
  MESSAGES_CONTAINER: 'messages'
  TURNS_CONTAINER: 'turns'
  COSMOS_CREATE_RESOURCES: 'false'
  MAX_ATTEMPTS: string(maxAttempts)
  CONCURRENCY: string(concurrencyPerReplica)
  SESSION_IDLE_SECONDS: sessionIdleSeconds
  LOCK_DURATION_SECONDS: string(lockDurationSeconds)
  MAX_LOCK_RENEWAL_SECONDS: string(maxLockRenewalSeconds)
  SHUTDOWN_GRACE_SECONDS: string(shutdownGraceSeconds)
  HTTP_PORT: string(httpPort)
  LOG_LEVEL: logLevel
}

var workerSettingsEnv = [for setting in items(workerSettings): {
  name: 'EXPORT_WORKER_${setting.key}'
  value: setting.value
}]

// Where the services are: known once they exist.
var workerEndpointsEnv = [
  // Two identities are attached: DefaultAzureCredential must pick the worker's.
  { name: 'AZURE_CLIENT_ID', value: workerIdentity.properties.clientId }
  { name: 'EXPORT_WORKER_SERVICEBUS_NAMESPACE', value: '${serviceBus.name}.servicebus.windows.net' }
  { name: 'EXPORT_WORKER_BLOB_ACCOUNT_URL', value: storage.properties.primaryEndpoints.blob }
  { name: 'EXPORT_WORKER_COSMOS_ENDPOINT', value: cosmos.properties.documentEndpoint }
]

var workerEnv = concat(workerEndpointsEnv, workerSettingsEnv)

resource worker 'Microsoft.App/containerApps@2025-01-01' = {
  name: '${base}-worker'
  location: location
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${workerIdentity.id}': {}
      '${scalerIdentity.id}': {}
    }
  }
  properties: {
    environmentId: appEnvironment.id
    workloadProfileName: 'Consumption'
    configuration: {
      activeRevisionsMode: 'Single'
      // No ingress: a queue consumer takes no requests. The probes below reach the
      // container's port directly.
      identitySettings: [
        {
          identity: workerIdentity.id
          lifecycle: 'Main'
        }
        {
          // Platform only (the scale rule): the container's code cannot get its tokens.
          identity: scalerIdentity.id
          lifecycle: 'None'
        }
      ]
      registries: registries
    }
    template: {
      // SIGTERM, then the worker's grace for in-flight turns, then abandon and close. On a
      // Service Bus that stopped answering, an abandon takes twice the SDK timeout (the
      // service's confirmation, then a second try over the management link) and the close
      // once more: the bound covers it. It costs nothing otherwise: the process exits as
      // soon as it is done, and SIGKILL comes only at the bound.
      terminationGracePeriodSeconds: shutdownGraceSeconds + 120
      containers: [
        {
          name: 'worker'
          image: image
          resources: {
            cpu: json(cpu)
            memory: memory
          }
          env: workerEnv
          // /healthz fails when the receive loop is hung (restart); /readyz until the
          // adapters are open and reachable (docs/operations.md, "Health endpoints").
          probes: [
            {
              type: 'Liveness'
              httpGet: {
                path: '/healthz'
                port: httpPort
              }
              initialDelaySeconds: 10
              periodSeconds: 15
              timeoutSeconds: 5
              failureThreshold: 4
            }
            {
              type: 'Readiness'
              httpGet: {
                path: '/readyz'
                port: httpPort
              }
              initialDelaySeconds: 5
              periodSeconds: 10
              timeoutSeconds: 5
              failureThreshold: 3
            }
          ]
        }
      ]
      scale: {
        minReplicas: minReplicas
        maxReplicas: maxReplicas
        rules: [
          {
            name: 'turn-completed-backlog'
            custom: {
              type: 'azure-servicebus'
              identity: scalerIdentity.id
              metadata: {
                namespace: serviceBus.name
                queueName: queueName
                messageCount: string(messagesPerReplica)
              }
            }
          }
        ]
      }
    }
  }
  dependsOn: [
    workerReceivesQueue
    workerSendsTopic
    workerReadsArtifacts
    workerWritesExports
    workerReadsMetadata
    workerReadsChat
    workerWritesTurns
    scalerOwnsQueue
    workerPullsImage
  ]
}

// ---------------------------------------------------------------------------------------------
// Monitoring: diagnostic settings to the workspace, alerts, who they notify
// ---------------------------------------------------------------------------------------------
resource serviceBusDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: serviceBus
  properties: {
    workspaceId: logs.id
    logs: [
      {
        categoryGroup: 'allLogs'
        enabled: true
      }
    ]
    metrics: [
      {
        category: 'AllMetrics'
        enabled: true
      }
    ]
  }
}

resource storageDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: storage
  properties: {
    workspaceId: logs.id
    metrics: [
      {
        category: 'Transaction'
        enabled: true
      }
    ]
  }
}

// Blob reads and writes (artifact fetches, export uploads): who, which path, what status.
resource blobDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: blobService
  properties: {
    workspaceId: logs.id
    logs: [
      {
        categoryGroup: 'allLogs'
        enabled: true
      }
    ]
    metrics: [
      {
        category: 'Transaction'
        enabled: true
      }
    ]
  }
}

resource cosmosDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: cosmos
  properties: {
    workspaceId: logs.id
    // Resource-specific tables (CDBDataPlaneRequests, ...) rather than AzureDiagnostics.
    logAnalyticsDestinationType: 'Dedicated'
    logs: [
      {
        categoryGroup: 'allLogs'
        enabled: true
      }
    ]
    metrics: [
      {
        category: 'Requests'
        enabled: true
      }
    ]
  }
}

var createActionGroup = empty(actionGroupId) && !empty(alertEmail)
var alertGroupName = '${base}-alerts'

resource alertGroup 'Microsoft.Insights/actionGroups@2023-01-01' = if (createActionGroup) {
  name: alertGroupName
  location: 'global'
  properties: {
    groupShortName: take(alertGroupName, 12)
    enabled: true
    emailReceivers: [
      {
        name: 'operators'
        emailAddress: alertEmail
        useCommonAlertSchema: true
      }
    ]
  }
}

var createdAlertGroupIds = createActionGroup ? [resourceId('Microsoft.Insights/actionGroups', alertGroupName)] : []
var alertGroupIds = empty(actionGroupId) ? createdAlertGroupIds : [actionGroupId]

// One rule per Service Bus entity metric, each firing while it stays past its threshold:
// - dead-letters: the queue's dead-letter count, which counts the broker's own
//   dead-lettering too (MaxDeliveryCountExceeded, expiry), which the worker never sees;
// - topic-filling: a subscription nobody reads fills the topic (expired messages move to its
//   dead-letter queue, which counts too); full, it refuses every publish and each turn is
//   retried, then dead-lettered transient_failure from ServiceBusQuotaExceededError.
var entityMetricAlerts = [
  {
    name: 'dead-letters'
    description: 'Messages wait in the ${queueName} dead-letter queue: list them with `export-worker dlq list` (docs/operations.md, one section per reason).'
    metricName: 'DeadletteredMessages'
    entityName: queueName
    threshold: 0
  }
  {
    name: 'topic-filling'
    description: 'The ${topicName} topic is past 80 % of its maximum size: a subscription is not read. Full, every export fails to publish (docs/operations.md, transient_failure).'
    metricName: 'Size'
    entityName: topicName
    threshold: topicMaxSizeMegabytes * 1048576 / 10 * 8
  }
]

resource entityMetricAlert 'Microsoft.Insights/metricAlerts@2018-03-01' = [for rule in entityMetricAlerts: {
  name: '${base}-${rule.name}'
  location: 'global'
  properties: {
    description: rule.description
    severity: 2
    enabled: true
    scopes: [
      serviceBus.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: rule.name
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: rule.metricName
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: [
                rule.entityName
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: rule.threshold
          timeAggregation: 'Average'
        }
      ]
    }
    autoMitigate: true
    actions: [for id in alertGroupIds: {
      actionGroupId: id
    }]
  }
  dependsOn: [
    alertGroup
  ]
}]

// A handler_error dead letter is a bug: one is enough to page. Read from the worker's own
// JSON log line (the metric above cannot tell reasons apart).
var handlerErrorQuery = join([
  'ContainerAppConsoleLogs_CL'
  '| where ContainerAppName_s == "${worker.name}"'
  '| extend e = parse_json(Log_s)'
  '| where tostring(e.event) == "message_dead_lettered" and tostring(e.reason) == "handler_error"'
], '\n')

resource handlerErrorAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: '${base}-handler-errors'
  location: location
  properties: {
    displayName: '${base}: handler_error dead letters'
    description: 'The worker dead-lettered a turn as handler_error (a bug): `export-worker dlq list --reason handler_error`, then docs/operations.md.'
    severity: 1
    enabled: true
    scopes: [
      logs.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    // The console log table appears with the first log line; the rule must not wait for it.
    skipQueryValidation: true
    criteria: {
      allOf: [
        {
          query: handlerErrorQuery
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: alertGroupIds
    }
  }
  dependsOn: [
    alertGroup
  ]
}

// ---------------------------------------------------------------------------------------------
// Outputs: what operators point `export-worker` at
// ---------------------------------------------------------------------------------------------
output workerAppName string = worker.name
output workerClientId string = workerIdentity.properties.clientId
output serviceBusNamespace string = '${serviceBus.name}.servicebus.windows.net'
output blobAccountUrl string = storage.properties.primaryEndpoints.blob
output cosmosEndpoint string = cosmos.properties.documentEndpoint
output logAnalyticsWorkspaceId string = logs.properties.customerId
