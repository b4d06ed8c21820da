/* Compiled by test_collector_abi.py against the real CUDA and CUPTI headers: every layout and id the collector
 * declares in cupti_abi.h must equal theirs, or this file does not compile. */
#include <cupti.h> /* brings cuda.h, cuda_runtime_api.h and the generated *_meta.h parameter structs */
#include "cupti_abi.h"
#define SAME(theirs, ours, field) _Static_assert(offsetof(theirs, field) == offsetof(ours, field), #theirs "." #field)
#define SIZE(theirs, ours) _Static_assert(sizeof(theirs) == sizeof(ours), "sizeof " #theirs)
#define ID(theirs, ours) _Static_assert((int)(theirs) == (int)(ours), #theirs)
#define SAME_AS(theirs, ours, tf, of) _Static_assert(offsetof(theirs, tf) == offsetof(ours, of), #theirs "." #tf)

SIZE(CUpti_CallbackData, bsm_callback_data);
SAME(CUpti_CallbackData, bsm_callback_data, callbackSite);
SAME(CUpti_CallbackData, bsm_callback_data, functionName);
SAME(CUpti_CallbackData, bsm_callback_data, functionParams);
SAME(CUpti_CallbackData, bsm_callback_data, functionReturnValue);
SAME(CUpti_CallbackData, bsm_callback_data, symbolName);
SAME(CUpti_CallbackData, bsm_callback_data, context);
SAME(CUpti_CallbackData, bsm_callback_data, correlationId);
ID(CUPTI_API_ENTER, BSM_API_ENTER); ID(CUPTI_API_EXIT, BSM_API_EXIT);
ID(CUPTI_CB_DOMAIN_DRIVER_API, BSM_DOMAIN_DRIVER); ID(CUPTI_CB_DOMAIN_RUNTIME_API, BSM_DOMAIN_RUNTIME);
ID(CUPTI_SUCCESS, BSM_CUPTI_SUCCESS);
ID(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, BSM_CUPTI_MULTIPLE_SUBSCRIBERS);

ID(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, BSM_CB_cuLaunchKernel);
ID(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, BSM_CB_cuLaunchKernel_ptsz);
ID(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, BSM_CB_cuLaunchCooperativeKernel);
ID(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz, BSM_CB_cuLaunchCooperativeKernel_ptsz);
ID(CUPTI_DRIVER_TRACE_CBID_cuFuncSetAttribute, BSM_CB_cuFuncSetAttribute);
ID(CUPTI_DRIVER_TRACE_CBID_cuGraphAddKernelNode, BSM_CB_cuGraphAddKernelNode);
ID(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, BSM_CB_cuLaunchKernelEx);
ID(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, BSM_CB_cuLaunchKernelEx_ptsz);
ID(CUPTI_DRIVER_TRACE_CBID_cuKernelSetAttribute, BSM_CB_cuKernelSetAttribute);
ID(CUPTI_DRIVER_TRACE_CBID_cuGraphAddKernelNode_v2, BSM_CB_cuGraphAddKernelNode_v2);
ID(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, BSM_CB_cudaLaunchKernel_v7000);
ID(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000, BSM_CB_cudaLaunchKernel_ptsz_v7000);
ID(CUPTI_RUNTIME_TRACE_CBID_cudaFuncSetAttribute_v9000, BSM_CB_cudaFuncSetAttribute_v9000);
ID(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddKernelNode_v10000, BSM_CB_cudaGraphAddKernelNode_v10000);
ID(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, BSM_CB_cudaLaunchKernelExC_v11060);
ID(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060, BSM_CB_cudaLaunchKernelExC_ptsz_v11060);

ID(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, BSM_ATTR_MAX_THREADS_PER_BLOCK);
ID(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, BSM_ATTR_SHARED_SIZE_BYTES);
ID(CU_FUNC_ATTRIBUTE_NUM_REGS, BSM_ATTR_NUM_REGS);
ID(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, BSM_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES);
ID(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, BSM_ATTR_PREFERRED_SHARED_MEMORY_CARVEOUT);
ID(CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, BSM_ATTR_CLUSTER_SCHEDULING_POLICY_PREFERENCE);
ID(cudaFuncAttributeMaxDynamicSharedMemorySize, BSM_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES);
ID(cudaFuncAttributePreferredSharedMemoryCarveout, BSM_ATTR_PREFERRED_SHARED_MEMORY_CARVEOUT);
ID(cudaFuncAttributeRequiredClusterWidth, BSM_ATTR_REQUIRED_CLUSTER_WIDTH);
ID(cudaFuncAttributeNonPortableClusterSizeAllowed, BSM_ATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED);
ID(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, BSM_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
ID(cudaLaunchAttributeClusterDimension, BSM_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);

SIZE(CUlaunchAttribute, bsm_launch_attribute);
SAME(CUlaunchAttribute, bsm_launch_attribute, id);
SAME(CUlaunchAttribute, bsm_launch_attribute, value);
SAME(CUlaunchAttribute, bsm_launch_attribute, value.clusterDim.z);
SIZE(cudaLaunchAttribute, bsm_launch_attribute);
SAME_AS(cudaLaunchAttribute, bsm_launch_attribute, val, value);
SAME_AS(cudaLaunchAttribute, bsm_launch_attribute, val.clusterDim.z, value.clusterDim.z);
SIZE(CUlaunchConfig, bsm_CUlaunchConfig);
SAME(CUlaunchConfig, bsm_CUlaunchConfig, blockDimZ);
SAME(CUlaunchConfig, bsm_CUlaunchConfig, sharedMemBytes);
SAME(CUlaunchConfig, bsm_CUlaunchConfig, hStream);
SAME(CUlaunchConfig, bsm_CUlaunchConfig, attrs);
SAME(CUlaunchConfig, bsm_CUlaunchConfig, numAttrs);
SIZE(cudaLaunchConfig_t, bsm_cudaLaunchConfig);
SAME(cudaLaunchConfig_t, bsm_cudaLaunchConfig, blockDim);
SAME(cudaLaunchConfig_t, bsm_cudaLaunchConfig, dynamicSmemBytes);
SAME(cudaLaunchConfig_t, bsm_cudaLaunchConfig, attrs);
SAME(cudaLaunchConfig_t, bsm_cudaLaunchConfig, numAttrs);
SIZE(CUDA_KERNEL_NODE_PARAMS_v2, bsm_CUDA_KERNEL_NODE_PARAMS_v2);
SAME(CUDA_KERNEL_NODE_PARAMS_v2, bsm_CUDA_KERNEL_NODE_PARAMS_v2, sharedMemBytes);
SAME(CUDA_KERNEL_NODE_PARAMS_v2, bsm_CUDA_KERNEL_NODE_PARAMS_v2, kern);
SIZE(CUDA_KERNEL_NODE_PARAMS_v1, bsm_CUDA_KERNEL_NODE_PARAMS_v1);
SAME(CUDA_KERNEL_NODE_PARAMS_v1, bsm_CUDA_KERNEL_NODE_PARAMS_v1, sharedMemBytes);
SIZE(struct cudaKernelNodeParams, bsm_cudaKernelNodeParams);
SAME(struct cudaKernelNodeParams, bsm_cudaKernelNodeParams, blockDim);
SAME(struct cudaKernelNodeParams, bsm_cudaKernelNodeParams, sharedMemBytes);

SIZE(cuFuncSetAttribute_params, bsm_cuFuncSetAttribute_params);
SAME(cuFuncSetAttribute_params, bsm_cuFuncSetAttribute_params, attrib);
SAME(cuFuncSetAttribute_params, bsm_cuFuncSetAttribute_params, value);
SIZE(cuKernelSetAttribute_params, bsm_cuKernelSetAttribute_params);
SAME(cuKernelSetAttribute_params, bsm_cuKernelSetAttribute_params, val);
SAME(cuKernelSetAttribute_params, bsm_cuKernelSetAttribute_params, kernel);
SAME(cuKernelSetAttribute_params, bsm_cuKernelSetAttribute_params, dev);
SIZE(cuLaunchKernel_params, bsm_cuLaunchKernel_params);
SAME(cuLaunchKernel_params, bsm_cuLaunchKernel_params, blockDimZ);
SAME(cuLaunchKernel_params, bsm_cuLaunchKernel_params, sharedMemBytes);
SAME(cuLaunchKernel_params, bsm_cuLaunchKernel_params, hStream);
SIZE(cuLaunchKernel_ptsz_params, bsm_cuLaunchKernel_params);
SAME(cuLaunchKernel_ptsz_params, bsm_cuLaunchKernel_params, sharedMemBytes);
SAME(cuLaunchCooperativeKernel_params, bsm_cuLaunchKernel_params, sharedMemBytes);
SAME(cuLaunchCooperativeKernel_params, bsm_cuLaunchKernel_params, hStream);
SAME(cuLaunchCooperativeKernel_ptsz_params, bsm_cuLaunchKernel_params, hStream);
SIZE(cuLaunchKernelEx_params, bsm_cuLaunchKernelEx_params);
SAME(cuLaunchKernelEx_params, bsm_cuLaunchKernelEx_params, f);
SAME(cuLaunchKernelEx_ptsz_params, bsm_cuLaunchKernelEx_params, f);
SIZE(cuGraphAddKernelNode_v2_params, bsm_cuGraphAddKernelNode_params);
SAME(cuGraphAddKernelNode_v2_params, bsm_cuGraphAddKernelNode_params, nodeParams);
SAME(cuGraphAddKernelNode_params, bsm_cuGraphAddKernelNode_params, nodeParams);
SIZE(cudaFuncSetAttribute_v9000_params, bsm_cudaFuncSetAttribute_params);
SAME(cudaFuncSetAttribute_v9000_params, bsm_cudaFuncSetAttribute_params, attr);
SAME(cudaFuncSetAttribute_v9000_params, bsm_cudaFuncSetAttribute_params, value);
SIZE(cudaLaunchKernel_v7000_params, bsm_cudaLaunchKernel_params);
SAME(cudaLaunchKernel_v7000_params, bsm_cudaLaunchKernel_params, blockDim);
SAME(cudaLaunchKernel_v7000_params, bsm_cudaLaunchKernel_params, sharedMem);
SAME(cudaLaunchKernel_v7000_params, bsm_cudaLaunchKernel_params, stream);
SAME(cudaLaunchKernel_ptsz_v7000_params, bsm_cudaLaunchKernel_params, sharedMem);
SIZE(cudaLaunchKernelExC_v11060_params, bsm_cudaLaunchKernelExC_params);
SAME(cudaLaunchKernelExC_v11060_params, bsm_cudaLaunchKernelExC_params, func);
SAME(cudaLaunchKernelExC_ptsz_v11060_params, bsm_cudaLaunchKernelExC_params, func);
SIZE(cudaGraphAddKernelNode_v10000_params, bsm_cudaGraphAddKernelNode_params);
SAME(cudaGraphAddKernelNode_v10000_params, bsm_cudaGraphAddKernelNode_params, pNodeParams);
